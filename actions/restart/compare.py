"""The before/after table of a replica change: latency, throughput, goodput, KV capacity, preemptions.

Each side is the probe's client-side statistics over its span, the spread of those statistics from
its own requests (`noise.SideSpread`), and the replica's snapshot over the span. A row holds both
values, the delta (after − before), the ratio (after / before), the run-to-run noise of the delta
and a verdict: better or worse only when the delta is beyond that noise, knowing which way is
better; a value either side lacks stays None, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import Enum

from slotop import fmt
from slotop.actions.restart.noise import (
    MIN_BATCHES,
    MIN_TAIL_SAMPLES,
    Noise,
    NoiseMethod,
    SideSpread,
    band_multiplier,
    counts_p_value,
    difference_noise,
)
from slotop.actions.restart.starts import Levels, StartSpread
from slotop.collectors.engines import kv_unit, preemption_words
from slotop.collectors.probe.stats import (
    THROUGHPUT_AGREEMENT_RATIO,
    LatencySummary,
    ProbeStats,
    throughput_disagrees,
    throughput_gap_ratio,
)
from slotop.collectors.snapshot import Snapshot

NOISE_FLOOR_RATIO = 0.01
"""A measured row's band is never narrower than this share of its before value: a change under
1% is within noise however steady both sides were (as benchmark comparers such as Criterion
hold), since a replica restarted onto the same dials differs from itself by that much (two
processes of the simulated replica, 13 µs on an ITL p50 of 6.8 ms, against a band of ±8 µs)."""
_MEASURED = (NoiseMethod.BOOTSTRAP, NoiseMethod.BATCH_MEANS)
SPAN_SLACK = 1.2
"""Spans within this ratio of each other count as the same span."""
DEFAULT_MIN_REQUESTS = 50
"""Requests a side needs before its percentiles are more than a handful of samples."""


class Better(Enum):
    """Which direction of a metric is an improvement."""

    LOWER = "lower"
    HIGHER = "higher"


class Change(Enum):
    """How the after value compares with the before one, against the noise (not an SLO verdict)."""

    BETTER = "better"
    WORSE = "worse"
    WITHIN_NOISE = "within noise"
    SAME = "same"
    NOISE_UNKNOWN = "noise unknown"


@dataclass(frozen=True, slots=True)
class SideSpan:
    """What a side measured: the requests sent from `start_s` to `end_s` (Unix seconds), and how
    long the load had run at its level when the side began (`settled_s` of it spent settling:
    from the load's start or resume to the end of its streams' opening requests)."""

    start_s: float
    end_s: float
    requests: int
    since_load_s: float | None = None
    settled_s: float | None = None

    def words(self) -> str:
        """The span in words: how many requests over how long, and how far into its load (and
        how long the load took to settle, where it had to)."""
        plural = "" if self.requests == 1 else "s"
        words = f"{self.requests} request{plural} over {self.end_s - self.start_s:.1f} s"
        if self.since_load_s is None:
            return words
        words += f", {self.since_load_s:.1f} s into its load"
        if self.settled_s:
            words += f" (settled after {self.settled_s:.1f} s)"
        return words


@dataclass(frozen=True, slots=True)
class RunSide:
    """One side of a before/after: a label, its dials, probe stats, their spread and a snapshot,
    and the span its requests were sent in."""

    label: str
    flags: tuple[tuple[str, str], ...] = ()
    stats: ProbeStats | None = None
    snapshot: Snapshot | None = None
    spread: SideSpread | None = None
    span: SideSpan | None = None


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One metric before and after, with delta, ratio, noise and verdict; None where a side is silent."""

    key: str
    label: str
    unit: str
    better: Better
    before: float | None
    after: float | None
    delta: float | None
    ratio: float | None
    noise: Noise
    verdict: Change | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The before/after table: both sides' labels and dials, the rows, and what to keep in mind."""

    before: RunSide
    after: RunSide
    rows: tuple[ComparisonRow, ...]
    notes: tuple[str, ...] = ()

    def row(self, key: str) -> ComparisonRow | None:
        """The row of one metric key, None when the table has none."""
        return next((row for row in self.rows if row.key == key), None)


def judge_change(
    before: float | None,
    after: float | None,
    better: Better,
    noise: Noise,
    *,
    direction: float | None = None,
) -> Change | None:
    """Better or worse when the delta is beyond the noise, else within it (or the same, for an
    exact value); None if a side is missing. `direction` (its sign) says which way the change
    went when the values alone do not (counts over unequal spans: the rate decides)."""
    if before is None or after is None:
        return None
    delta = after - before
    beyond = noise.beyond(delta)
    if beyond is None:
        return Change.NOISE_UNKNOWN
    if not beyond:
        return Change.SAME if noise.method is NoiseMethod.EXACT else Change.WITHIN_NOISE
    moved = delta if direction is None else direction
    improved = moved < 0 if better is Better.LOWER else moved > 0
    return Change.BETTER if improved else Change.WORSE


Getter = Callable[[RunSide], float | None]
NoiseRule = Callable[[RunSide, RunSide], Noise]


@dataclass(frozen=True, slots=True)
class _Spec:
    """What one row reads from each side, and how its noise is estimated."""

    key: str
    label: str
    unit: str
    better: Better
    get: Getter
    noise: NoiseRule
    rate: Getter | None = None
    """For counts: the rate whose change gives the direction when the spans differ."""
    error: Getter | None = None
    """For measured rows: the side's standard error of its value."""


def _stats(read: Callable[[ProbeStats], float | None]) -> Getter:
    return lambda side: read(side.stats) if side.stats is not None else None


def _snap(read: Callable[[Snapshot], float | None]) -> Getter:
    return lambda side: read(side.snapshot) if side.snapshot is not None else None


def _spread(read: Callable[[SideSpread], float | None]) -> Getter:
    return lambda side: read(side.spread) if side.spread is not None else None


def _latency(stats: ProbeStats, kind: str, percentile: float) -> float | None:
    summary: LatencySummary = getattr(stats, kind)
    try:
        return summary.at(percentile)
    except KeyError:
        return None


def _unknown_words(before: RunSide, after: RunSide) -> str:
    """Why a side's errors are missing: too short to cut into batches, or no spread at all."""
    if before.spread is None or after.spread is None:
        return "a side has no requests to estimate it from"
    if before.spread.batches is None or after.spread.batches is None:
        return (
            f"a side is shorter than {MIN_BATCHES} batches of two request lifetimes; "
            "a longer side estimates it"
        )
    return "a side holds too few requests to estimate it"


def _from_errors(method: NoiseMethod, error: Getter) -> NoiseRule:
    def rule(before: RunSide, after: RunSide) -> Noise:
        spreads = (before.spread, after.spread)
        multiplier = band_multiplier(
            *(spread.batches if spread is not None else None for spread in spreads)
        )
        half_width = difference_noise(error(before), error(after), multiplier)
        if half_width is None:
            return Noise(method, unknown=_unknown_words(before, after))
        return Noise(method, half_width)

    return rule


def _percentile_noise(kind: str, percentile: float, error: Getter) -> NoiseRule:
    """A percentile's noise, unknown while a side has too few samples above it to judge."""
    batches = _from_errors(NoiseMethod.BOOTSTRAP, error)

    def rule(before: RunSide, after: RunSide) -> Noise:
        if any(
            s.spread is not None and s.spread.is_thin(kind, percentile) for s in (before, after)
        ):
            needed = round(MIN_TAIL_SAMPLES / (1.0 - percentile / 100.0))
            what = "requests" if kind == "ttft" else "gaps"
            return Noise(
                NoiseMethod.BOOTSTRAP,
                unknown=f"p{percentile:g} needs about {needed} {what} a side",
            )
        return batches(before, after)

    return rule


def _exact(before: RunSide, after: RunSide) -> Noise:
    return Noise(NoiseMethod.EXACT)


def _counts(count: Getter, span: Getter) -> NoiseRule:
    def rule(before: RunSide, after: RunSide) -> Noise:
        values = (count(before), span(before), count(after), span(after))
        if any(value is None for value in values):
            return Noise(NoiseMethod.COUNTS)
        k1, t1, k2, t2 = (float(value or 0.0) for value in values)
        return Noise(NoiseMethod.COUNTS, p_value=counts_p_value(k1, t1, k2, t2))

    return rule


def _goodput_ratio(stats: ProbeStats) -> float | None:
    return stats.goodput.ratio if stats.goodput is not None else None


def _goodput_rate(stats: ProbeStats) -> float | None:
    return stats.goodput.rate_rps if stats.goodput is not None else None


def _int_or_none(value: int | None) -> float | None:
    return float(value) if value is not None else None


def _latency_spec(name: str, kind: str, percentile: float) -> _Spec:
    label = f"p{percentile:g}"

    def value(stats: ProbeStats) -> float | None:
        return _latency(stats, kind, percentile)

    def error(spread: SideSpread) -> float | None:
        return spread.latency(kind, percentile)

    return _Spec(
        f"{kind}_{label}_s",
        f"{name} {label}",
        "s",
        Better.LOWER,
        _stats(value),
        _percentile_noise(kind, percentile, _spread(error)),
        error=_spread(error),
    )


def _latency_specs(name: str, kind: str, percentiles: tuple[float, ...]) -> list[_Spec]:
    return [_latency_spec(name, kind, p) for p in percentiles]


def _percentiles_with_median(percentile: float) -> tuple[float, ...]:
    return (50.0,) if percentile == 50.0 else (50.0, percentile)


def _window_span(snapshot: Snapshot) -> float | None:
    return snapshot.window.covered_s


@dataclass(frozen=True, slots=True)
class EngineWords:
    """What the replica's engine calls the KV cache's units and a request sent back to wait, for
    the rows read from its snapshots: vLLM's blocks and preemptions unless a snapshot says
    SGLang (its tokens, or pages, and retractions)."""

    kv_label: str = "KV blocks"
    kv_unit: str = "blocks"
    preempted: str = "preemptions"

    @property
    def preemption(self) -> str:
        """One of them, as a noun: preemption, retraction."""
        return self.preempted.removesuffix("s")


def engine_words(before: RunSide, after: RunSide) -> EngineWords:
    """The words of the engine the sides' snapshots read (the after side's, else the before's)."""
    snapshot = after.snapshot or before.snapshot
    if snapshot is None or snapshot.replica.engine == "vllm":
        return EngineWords()
    engine = snapshot.replica.engine
    many = kv_unit(engine, snapshot.kv.block_size_tokens)[1]
    # Pages of one token are the KV tokens row's own count: say what they are, token slots.
    label = "KV token slots" if many == "tokens" else f"KV {many}"
    return EngineWords(label, many, preemption_words(engine)[1])


def _specs(slo_percentiles: tuple[float, float], words: EngineWords | None = None) -> list[_Spec]:
    """The rows the table holds, in order, the snapshot rows in the engine's words."""
    words = words or EngineWords()
    ttft_p, itl_p = slo_percentiles
    failed = _stats(lambda s: float(s.requests_failed))
    duration = _stats(lambda s: s.duration_s)
    preemptions = _snap(lambda s: s.window.preemptions)
    return [
        *_latency_specs("TTFT", "ttft", _percentiles_with_median(ttft_p)),
        *_latency_specs("ITL", "itl", _percentiles_with_median(itl_p)),
        _Spec(
            "output_tokens_per_s",
            "output tokens",
            "tok/s",
            Better.HIGHER,
            _stats(lambda s: s.output_tokens_per_s),
            _from_errors(NoiseMethod.BATCH_MEANS, _spread(lambda s: s.output_tokens_per_s)),
            error=_spread(lambda s: s.output_tokens_per_s),
        ),
        _Spec(
            "request_rate_rps",
            "requests",
            "req/s",
            Better.HIGHER,
            _stats(lambda s: s.request_rate_rps),
            _from_errors(NoiseMethod.BATCH_MEANS, _spread(lambda s: s.request_rate_rps)),
            error=_spread(lambda s: s.request_rate_rps),
        ),
        _Spec(
            "goodput_rps",
            "goodput",
            "req/s",
            Better.HIGHER,
            _stats(_goodput_rate),
            _from_errors(NoiseMethod.BATCH_MEANS, _spread(lambda s: s.goodput_rps)),
            error=_spread(lambda s: s.goodput_rps),
        ),
        _Spec(
            "goodput_ratio",
            "goodput (share)",
            "ratio",
            Better.HIGHER,
            _stats(_goodput_ratio),
            _from_errors(NoiseMethod.BOOTSTRAP, _spread(lambda s: s.goodput_ratio)),
            error=_spread(lambda s: s.goodput_ratio),
        ),
        _Spec(
            "requests_failed",
            "failed requests",
            "count",
            Better.LOWER,
            failed,
            _counts(failed, duration),
            rate=_stats(lambda s: s.requests_failed / s.duration_s if s.duration_s > 0 else None),
        ),
        _Spec(
            "kv_blocks_total",
            words.kv_label,
            words.kv_unit,
            Better.HIGHER,
            _snap(lambda s: _int_or_none(s.kv.blocks_total)),
            _exact,
        ),
        _Spec(
            "kv_size_tokens",
            "KV tokens",
            "tokens",
            Better.HIGHER,
            _snap(lambda s: _int_or_none(s.kv.size_tokens)),
            _exact,
        ),
        _Spec(
            "kv_max_concurrency",
            "seqs at max context",
            "seqs",
            Better.HIGHER,
            _snap(lambda s: s.kv.max_concurrency),
            _exact,
        ),
        _Spec(
            "preemptions",
            words.preempted,
            "count",
            Better.LOWER,
            preemptions,
            _counts(preemptions, _snap(_window_span)),
            rate=_snap(lambda s: s.window.preemptions_per_s),
        ),
        _Spec(
            "preemptions_per_s",
            f"{words.preemption} rate",
            "/s",
            Better.LOWER,
            _snap(lambda s: s.window.preemptions_per_s),
            _counts(preemptions, _snap(_window_span)),
        ),
    ]


def with_floor(noise: Noise, before: float | None) -> Noise:
    """A measured row's band, never narrower than `NOISE_FLOOR_RATIO` of the before value."""
    if noise.half_width is None or before is None or noise.method not in _MEASURED:
        return noise
    return replace(noise, half_width=max(noise.half_width, NOISE_FLOOR_RATIO * abs(before)))


def with_starts(
    noise: Noise, key: str, before: float | None, after: float | None, spread: StartSpread | None
) -> Noise:
    """A measured row's band widened by the replica's start-to-start spread, in quadrature."""
    if spread is None or noise.half_width is None or before is None or after is None:
        return noise
    if noise.method not in _MEASURED:
        return noise
    term = spread.half_width(key, before, after)
    if term is None:
        return noise
    return replace(noise, half_width=math.hypot(noise.half_width, term), between_starts=term)


def _row(
    spec: _Spec, before: RunSide, after: RunSide, spread: StartSpread | None = None
) -> ComparisonRow:
    """One row: delta after − before, ratio after / before (None when before is 0)."""
    old, new = spec.get(before), spec.get(after)
    noise = with_starts(with_floor(spec.noise(before, after), old), spec.key, old, new, spread)
    direction = None
    if spec.rate is not None:
        rates = (spec.rate(before), spec.rate(after))
        if rates[0] is not None and rates[1] is not None:
            direction = rates[1] - rates[0]
    both = old is not None and new is not None
    return ComparisonRow(
        key=spec.key,
        label=spec.label,
        unit=spec.unit,
        better=spec.better,
        before=old,
        after=new,
        delta=new - old if both and new is not None and old is not None else None,
        ratio=new / old if both and old and new is not None else None,
        noise=noise,
        verdict=judge_change(old, new, spec.better, noise, direction=direction),
    )


def _unknown_notes(rows: tuple[ComparisonRow, ...]) -> list[str]:
    """One note per reason a row's noise is unknown, naming its rows."""
    reasons: dict[str, list[str]] = {}
    for row in rows:
        if row.verdict is Change.NOISE_UNKNOWN and row.noise.unknown:
            reasons.setdefault(row.noise.unknown, []).append(row.label)
    return [f"noise unknown for {', '.join(labels)}: {why}" for why, labels in reasons.items()]


def _notes(
    before: RunSide, after: RunSide, min_requests: int, words: EngineWords
) -> tuple[str, ...]:
    notes = []
    if before.stats is not None and after.stats is not None:
        spans = (before.stats.duration_s, after.stats.duration_s)
        if min(spans) > 0 and max(spans) / min(spans) > SPAN_SLACK:
            notes.append(
                f"the spans differ ({spans[0]:.0f} s vs {spans[1]:.0f} s): "
                "counts are not comparable, rates are"
            )
        counts = (before.stats.requests_ok, after.stats.requests_ok)
        if min(counts) < min_requests:
            notes.append(
                f"few requests ({counts[0]} and {counts[1]}, under {min_requests}): "
                "a high percentile rests on a handful of samples, so its noise is wide"
            )
    for side in (before, after):
        notes += _side_notes(side)
    lacking = _which_sides(before.stats is None, after.stats is None)
    if lacking:
        notes.append(f"no probe statistics {lacking}: client-side rows are N/A")
    lacking = _which_sides(before.snapshot is None, after.snapshot is None)
    if lacking:
        notes.append(f"no replica snapshot {lacking}: KV and {words.preemption} rows are N/A")
    return tuple(notes)


def _which_sides(before: bool, after: bool) -> str:
    """Which sides a note is about, in words ('' for neither)."""
    if before and after:
        return "on either side"
    return "before" if before else "after" if after else ""


def _side_notes(side: RunSide) -> list[str]:
    """What to keep in mind about one side: requests cut by the wait, token rates that disagree."""
    stats = side.stats
    notes: list[str] = []
    if stats is None:
        return notes
    if stats.requests_cut:
        notes.append(
            f"{side.label}: {stats.requests_cut} requests still streamed when the wait past the "
            "span ran out, or were cut by the restart; their latencies are left out"
        )
    covered = side.snapshot.window.covered_s if side.snapshot is not None else None
    if covered is not None and stats.duration_s > 0 and covered > SPAN_SLACK * stats.duration_s:
        notes.append(
            f"{side.label}: the replica's rates and counts cover its last {covered:.0f} s, more "
            f"than the side's {stats.duration_s:.0f} s"
        )
        return notes  # its token rate is over another span: no agreement to check
    server = side.snapshot.window.generation_tokens_per_s if side.snapshot is not None else None
    if throughput_disagrees(stats.output_tokens_per_s, server):
        gap = throughput_gap_ratio(stats.output_tokens_per_s, server)
        notes.append(
            f"{side.label}: the probe's {fmt.number(stats.output_tokens_per_s, 1)} tok/s and the "
            f"replica's {fmt.number(server, 1)} tok/s differ by {fmt.fixed(gap, '+.0%')} (more "
            f"than {THROUGHPUT_AGREEMENT_RATIO:.0%}): other clients share the replica, or its "
            "counters missed the span"
        )
    return notes


def _starts_notes(rows: tuple[ComparisonRow, ...], spread: StartSpread | None) -> list[str]:
    """Whether the band holds the replica's start-to-start spread, and how big it was."""
    if spread is None:
        moved = [
            row.label
            for row in rows
            if row.noise.method in _MEASURED and row.verdict in (Change.BETTER, Change.WORSE)
        ]
        if not moved:
            return []  # a wider band would change no verdict
        return [
            "start-to-start spread unmeasured: on a real engine a restart alone can move "
            f"{', '.join(moved)}; `slotop restart --starts 4 --concurrency N` measures it, and "
            "later before/afters widen their band by it"
        ]
    shown = [
        f"{row.label} {spread.relative[row.key]:.0%}"
        for row in rows
        if row.noise.between_starts is not None and row.key in _STARTS_SHOWN
    ]
    return [
        f"the band holds the start-to-start spread: {', '.join(shown) or 'none'} ({spread.words()})"
    ]


_STARTS_SHOWN = ("ttft_p50_s", "itl_p50_s", "output_tokens_per_s")


def row_labels(slo_percentiles: tuple[float, float]) -> dict[str, str]:
    """Each row's key and the label the table shows it by."""
    return {spec.key: spec.label for spec in _specs(slo_percentiles)}


def measured_levels(side: RunSide, slo_percentiles: tuple[float, float]) -> Levels:
    """A side's measured rows, each with its standard error: what a start contributes to a
    start-to-start spread (`starts.estimate_start_spread`)."""
    levels: dict[str, tuple[float, float | None]] = {}
    for spec in _specs(slo_percentiles):
        value = spec.get(side)
        if spec.error is not None and value is not None:
            levels[spec.key] = (value, spec.error(side))
    return levels


def compare_runs(
    before: RunSide,
    after: RunSide,
    *,
    slo_percentiles: tuple[float, float] = (99.0, 99.0),
    min_requests: int = DEFAULT_MIN_REQUESTS,
    start_spread: StartSpread | None = None,
) -> Comparison:
    """Build the before/after table at p50 and the SLO's TTFT and ITL percentiles (which the
    sides' stats and spreads must hold), each delta judged against its noise, widened by the
    replica's measured start-to-start spread where there is one."""
    words = engine_words(before, after)
    specs = _specs(slo_percentiles, words)
    rows = tuple(_row(spec, before, after, start_spread) for spec in specs)
    notes = (
        *_notes(before, after, min_requests, words),
        *_unknown_notes(rows),
        *_starts_notes(rows, start_spread),
    )
    return Comparison(before, after, rows, notes)
