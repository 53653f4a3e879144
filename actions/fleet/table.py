"""The fleet table: one row per replica, worst first, and one per model, from tracked figures.

A replica's verdict is the SLO's own (`judge_estimate` on each target's bucket, `overall` of the
two), and stale latencies give none, as on the dashboard. Rows sort worst first: down, breach,
stale, undecided, no data, pass; inside each, the latency nearest (or furthest past) its target
first, then the other latency. A model's row adds its fresh replicas' bucket increases and takes its percentiles from
the merged buckets, never from an average of percentiles; its rates and request counts are
sums, its KV usage the mean of its replicas'.
"""

from __future__ import annotations

import enum
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from slotop.actions.fleet.outliers import Flag, OutlierThresholds, Peer, outlier_flags
from slotop.actions.fleet.tracker import FleetState, TrackedReplica
from slotop.actions.slo import Verdict, judge_estimate, overall
from slotop.collectors.fleet import ALL_FIELDS, LATENCY_FIELDS, LatencyFigure, ReplicaKey, merged
from slotop.collectors.histograms import QuantileEstimate
from slotop.slo import Slo


class Standing(enum.IntEnum):
    """Where a row sorts: the lower, the worse."""

    DOWN = 0
    BREACH = 1
    STALE = 2
    UNDECIDED = 3
    NO_DATA = 4
    PASS = 5


@dataclass(frozen=True, slots=True)
class LatencyCell:
    """One latency at the SLO's percentile: the estimate (with its bucket), count and verdict."""

    percentile: float
    target_s: float
    estimate: QuantileEstimate | None
    count: float | None
    verdict: Verdict

    @property
    def load_ratio(self) -> float:
        """Value over target; 0 without a value, so an empty window sorts as the least loaded."""
        return 0.0 if self.estimate is None else self.estimate.value / self.target_s


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One replica as the table shows it; None where unknown, `stale` saying why values are old."""

    key: ReplicaKey
    name: str
    model: str
    verdict: Verdict
    standing: Standing
    ttft: LatencyCell
    itl: LatencyCell
    generation_tokens_per_s: float | None
    preemptions_per_s: float | None
    running: float | None
    waiting: float | None
    kv_usage_ratio: float | None
    up: bool | None
    stale: str | None
    stale_fields: tuple[str, ...]
    flags: tuple[Flag, ...]
    window_s: float | None
    answered: bool = True
    covered_s: float | None = None
    """Set when the source holds less than the window: the span the figures cover."""
    engine: str | None = None
    """vllm or sglang (None: not known yet)."""


@dataclass(frozen=True, slots=True)
class ModelRow:
    """One model summed across its replicas: merged buckets, summed rates and requests."""

    model: str
    replicas: int
    fresh: int
    up: int
    verdict: Verdict
    standing: Standing
    ttft: LatencyCell
    itl: LatencyCell
    generation_tokens_per_s: float | None
    preemptions_per_s: float | None
    running: float | None
    waiting: float | None
    kv_usage_ratio: float | None
    flagged: tuple[str, ...]
    covered_s: float | None = None
    """Set when a fresh replica's figures cover less than the window: the shortest span."""
    engine: str | None = None
    """The engine its replicas run: a model's row merges one engine's buckets only."""


@dataclass(frozen=True, slots=True)
class FleetTable:
    """The whole table at one moment, with what the source said about itself."""

    taken_at_s: float
    source: str
    rows: tuple[ReplicaRow, ...]
    models: tuple[ModelRow, ...]
    error: str | None = None
    warnings: tuple[str, ...] = ()
    query_s: float | None = None
    queries: int = 0
    window_s: float | None = None

    @property
    def unanswered(self) -> str | None:
        """Why the table holds no live figure when none of its replicas answered the latest
        poll (the first row's reason); None when one did, or the table is empty."""
        if not self.rows or any(row.answered for row in self.rows):
            return None
        count = len(self.rows)
        reason = next((row.stale for row in self.rows if row.stale), "no reason given")
        which = "the replica" if count == 1 else f"none of the {count} replicas"
        verb = "did not answer" if count == 1 else "answered"
        return f"{which} {verb}: {reason}"


def display_names(keys: Sequence[ReplicaKey], model_label: str) -> dict[ReplicaKey, str]:
    """A short name per replica: its last replica label (the instance) or URL, longer if shared."""

    def label_values(key: ReplicaKey) -> list[str]:
        return [value for name, value in key.labels if name != model_label and value]

    def short(key: ReplicaKey) -> str:
        values = label_values(key)
        return values[-1] if values else (key.url or "?")

    def long(key: ReplicaKey) -> str:
        return "/".join(label_values(key)) or (key.url or "?")

    names: dict[ReplicaKey, str] = {}
    for naming in (short, long):
        counts: dict[str, int] = {}
        for key in keys:
            counts[naming(key)] = counts.get(naming(key), 0) + 1
        for key in keys:
            if key not in names and counts[naming(key)] == 1:
                names[key] = naming(key)
    for key in keys:
        names.setdefault(key, f"{long(key)} {key.label(model_label)}".strip())
    return names


def _cell(figure: LatencyFigure | None, percentile: float, target_s: float) -> LatencyCell:
    estimate = figure.estimate if figure is not None else None
    count = figure.count if figure is not None else None
    return LatencyCell(percentile, target_s, estimate, count, judge_estimate(estimate, target_s))


def _standing(verdict: Verdict, up: bool | None, stale_latency: bool) -> Standing:
    if up is False:
        return Standing.DOWN
    if verdict is Verdict.BREACH:
        return Standing.BREACH
    if stale_latency:
        return Standing.STALE
    return {
        Verdict.UNDECIDED: Standing.UNDECIDED,
        Verdict.UNKNOWN: Standing.NO_DATA,
        Verdict.PASS: Standing.PASS,
    }[verdict]


def _replica_row(tracked: TrackedReplica, name: str, slo: Slo) -> ReplicaRow:
    figures = tracked.figures
    stale_fields = tuple(field for field, _ in tracked.stale)
    stale_latency = any(field in LATENCY_FIELDS for field in stale_fields)
    ttft = _cell(figures.ttft, slo.ttft_percentile, slo.ttft_s)
    itl = _cell(figures.itl, slo.itl_percentile, slo.itl_s)
    # Stale data gives no verdict, as on the dashboard.
    verdict = Verdict.UNKNOWN if stale_latency else overall((ttft.verdict, itl.verdict))
    return ReplicaRow(
        key=figures.key,
        name=name,
        model=figures.model,
        verdict=verdict,
        standing=_standing(verdict, figures.up, stale_latency),
        ttft=ttft,
        itl=itl,
        generation_tokens_per_s=figures.generation_tokens_per_s,
        preemptions_per_s=figures.preemptions_per_s,
        running=figures.running,
        waiting=figures.waiting,
        kv_usage_ratio=figures.kv_usage_ratio,
        up=figures.up,
        stale=tracked.stale_reason,
        stale_fields=stale_fields,
        flags=(),
        window_s=figures.window_s,
        # Down (up = 0, or a direct scrape failed), or not one figure read by the latest poll.
        answered=figures.up is not False
        and any(field not in stale_fields for field in ALL_FIELDS if field != "up"),
        covered_s=figures.covered_s,
        engine=figures.engine,
    )


def _row_order(row: ReplicaRow | ModelRow) -> tuple[int, float, float, str]:
    name = row.name if isinstance(row, ReplicaRow) else row.model
    nearer, further = sorted((row.ttft.load_ratio, row.itl.load_ratio), reverse=True)
    return row.standing, -nearer, -further, name


def _sum(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return sum(present) if present else None


def _model_row(
    group: tuple[str | None, str],
    rows: list[ReplicaRow],
    tracked: dict[ReplicaKey, TrackedReplica],
    slo: Slo,
) -> ModelRow:
    engine, model = group
    fresh = [row for row in rows if not row.stale_fields]
    figures = [tracked[row.key].figures for row in fresh]
    ttft = _cell(
        merged([f.ttft for f in figures if f.ttft is not None]), slo.ttft_percentile, slo.ttft_s
    )
    itl = _cell(
        merged([f.itl for f in figures if f.itl is not None]), slo.itl_percentile, slo.itl_s
    )
    verdict = overall((ttft.verdict, itl.verdict)) if fresh else Verdict.UNKNOWN
    usages = [row.kv_usage_ratio for row in fresh if row.kv_usage_ratio is not None]
    covered = [row.covered_s for row in fresh if row.covered_s is not None]
    return ModelRow(
        model=model,
        replicas=len(rows),
        fresh=len(fresh),
        up=sum(1 for row in rows if row.up),
        verdict=verdict,
        standing=_standing(verdict, None if fresh else False, False),
        ttft=ttft,
        itl=itl,
        generation_tokens_per_s=_sum(row.generation_tokens_per_s for row in fresh),
        preemptions_per_s=_sum(row.preemptions_per_s for row in fresh),
        running=_sum(row.running for row in fresh),
        waiting=_sum(row.waiting for row in fresh),
        kv_usage_ratio=statistics.fmean(usages) if usages else None,
        flagged=tuple(row.name for row in rows if row.flags),
        covered_s=min(covered) if covered else None,
        engine=engine,
    )


def fleet_table(
    state: FleetState,
    slo: Slo,
    thresholds: OutlierThresholds,
    *,
    model_label: str = "model_name",
) -> FleetTable:
    """Build the table: rows worst first, outliers flagged by name, a row per model."""
    tracked = {replica.figures.key: replica for replica in state.replicas}
    names = display_names(list(tracked), model_label)
    rows = [_replica_row(replica, names[key], slo) for key, replica in tracked.items()]
    # One engine's replicas of a model are peers: their buckets merge and their outliers are
    # judged against each other, never against the other engine's.
    by_model: dict[tuple[str | None, str], list[ReplicaRow]] = {}
    for row in rows:
        by_model.setdefault((row.engine, row.model), []).append(row)
    flagged: dict[str, tuple[Flag, ...]] = {}
    for members in by_model.values():
        peers = [
            Peer(row.name, row.ttft.estimate, row.kv_usage_ratio, row.running)
            for row in members
            if not row.stale_fields
        ]
        flagged.update(outlier_flags(peers, thresholds, slo.ttft_percentile))
    rows = [_with_flags(row, flagged.get(row.name, ())) for row in rows]
    by_model = {}
    for row in rows:
        by_model.setdefault((row.engine, row.model), []).append(row)
    models = [_model_row(group, members, tracked, slo) for group, members in by_model.items()]
    return FleetTable(
        taken_at_s=state.taken_at_s,
        source=state.source,
        rows=tuple(sorted(rows, key=_row_order)),
        models=tuple(sorted(models, key=_row_order)),
        error=state.error,
        warnings=state.warnings,
        query_s=state.query_s,
        queries=state.queries,
        window_s=state.window_s,
    )


def _with_flags(row: ReplicaRow, flags: tuple[Flag, ...]) -> ReplicaRow:
    return replace(row, flags=flags) if flags else row
