"""The session over time: the replica's numbers as the monitor showed them, the probe's requests and
load, and every action, drawn on one time axis (pure; `slotop.actions.plots` draws it).

The replica's series come from replaying the recorded readings through the monitor's own code
(`slotop.actions.session.rebuild`), over its short window, so they are the numbers the dashboard
showed at each poll.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slotop.actions.plots import Mark, Panel, Series, Span, TimelineFigure
from slotop.actions.replica.spec import Dials, dial_words
from slotop.actions.session.reader import Recording
from slotop.actions.session.rebuild import snapshots
from slotop.collectors.probe.records import LOAD_STEP_KINDS, EventKind
from slotop.collectors.snapshot import LatencyQuantiles, Snapshot, WindowStats


@dataclass(frozen=True, slots=True)
class ReplicaSeries:
    """What the monitor showed at each poll (times in Unix seconds), and the first and last view."""

    t_s: tuple[float, ...] = ()
    ttft_s: tuple[float | None, ...] = ()
    itl_s: tuple[float | None, ...] = ()
    tokens_per_s: tuple[float | None, ...] = ()
    kv_usage_ratio: tuple[float | None, ...] = ()
    running: tuple[float | None, ...] = ()
    waiting: tuple[float | None, ...] = ()
    first: Snapshot | None = None
    last: Snapshot | None = None


def _configured(quantiles: LatencyQuantiles) -> float | None:
    estimate = quantiles.configured
    return estimate.value if estimate is not None else None


def replica_series(recording: Recording) -> ReplicaSeries:
    """Replay every recorded poll and keep, per poll, the numbers the timeline draws."""
    columns: dict[str, list[Any]] = {
        name: [] for name in ("t", "ttft", "itl", "tokens", "kv", "running", "waiting")
    }
    first: Snapshot | None = None
    last: Snapshot | None = None
    for snapshot in snapshots(recording):
        if first is None or (first.replica.model_name is None and snapshot.replica.model_name):
            first = snapshot  # the first poll, or the first to name the model
        last = snapshot
        window: WindowStats = snapshot.short_window or snapshot.window
        columns["t"].append(snapshot.taken_at_s)
        columns["ttft"].append(_configured(window.ttft_s))
        columns["itl"].append(_configured(window.itl_s))
        columns["tokens"].append(window.generation_tokens_per_s)
        columns["kv"].append(snapshot.kv.usage_ratio)
        columns["running"].append(snapshot.requests.running)
        columns["waiting"].append(snapshot.requests.waiting)
    return ReplicaSeries(
        t_s=tuple(columns["t"]),
        ttft_s=tuple(columns["ttft"]),
        itl_s=tuple(columns["itl"]),
        tokens_per_s=tuple(columns["tokens"]),
        kv_usage_ratio=tuple(columns["kv"]),
        running=tuple(columns["running"]),
        waiting=tuple(columns["waiting"]),
        first=first,
        last=last,
    )


def dials_words(data: Mapping[str, Any]) -> str:
    """Recorded dials in a few words: `fp8, max_num_seqs 64, max_num_batched_tokens default`."""
    dials = Dials.from_json(data)
    return (
        f"{dials.kv_cache_dtype}, max_num_seqs {dial_words(dials.max_num_seqs)}, "
        f"max_num_batched_tokens {dial_words(dials.max_num_batched_tokens)}"
    )


def action_words(data: Mapping[str, Any]) -> str:
    """An action line in a few words, for the timeline's marks and the events table."""
    action = str(data.get("action"))
    if action == "dials":
        return f"dials: {dials_words(data.get('dials') or {})}"
    if action == "restart_planned":
        return f"restart planned: {dials_words(data.get('dials_after') or {})}"
    if action == "restart":
        downtime = data.get("downtime_s")
        down = f", {downtime:.1f} s down" if isinstance(downtime, int | float) else ""
        return f"restart {str(data.get('outcome', '?')).replace('_', ' ')}{down}"
    if action == "before_after":
        return _panel_words(data)
    if action == "restart_quality":
        quality = data.get("quality") or {}
        if quality.get("not_run"):
            return f"quality check not run: {quality['not_run']}"
        total = quality.get("prompts_total")
        return f"quality check: {quality.get('prompts_identical')} of {total} outputs identical"
    if action == "sweep_step":
        step = data.get("step") or {}
        return f"sweep step at concurrency {step.get('concurrency')} measured"
    if action == "sweep_result":
        sweep = data.get("sweep") or {}
        chosen = (sweep.get("recommendation") or {}).get("concurrency")
        point = f"operating point {chosen}" if chosen is not None else "no operating point"
        return f"sweep ended ({str(sweep.get('stop')).replace('_', ' ')}): {point}"
    return action.replace("_", " ")


def _panel_words(data: Mapping[str, Any]) -> str:
    """A change of the dashboard's before/after panel in a few words."""
    state, load = data.get("state"), data.get("load")
    if state == "measuring":
        return f"before/after measuring at {load}: {data.get('changes')}"
    if state == "progress":
        return f"before/after: {data.get('requests')} of {data.get('wanted')} requests"
    if state == "measured":
        return f"before/after measured at {load}"
    if state == "stopped":
        return f"before/after stopped: {data.get('stopped')}"
    return "before/after hidden"


MARKED_ACTIONS = ("dials", "restart_planned", "restart", "sweep_result")
"""Actions drawn as a line on the timeline; sweep steps are drawn as shaded spans instead."""


@dataclass(frozen=True, slots=True)
class TimelineMark:
    """An action as the timeline marks it: its number on the plot, when (Unix), in words.

    A `dials` action is marked from when the replica served with them (`since_s`) when known."""

    number: int
    t_s: float
    words: str


def timeline_marks(recording: Recording) -> tuple[TimelineMark, ...]:
    """The marked actions in time order, numbered from 1."""
    found: list[tuple[float, str]] = []
    for line in recording.of_kind("action"):
        if line.data.get("action") not in MARKED_ACTIONS:
            continue
        since = line.data.get("since_s") if line.data.get("action") == "dials" else None
        at = float(since) if isinstance(since, int | float) else line.t_s
        found.append((at, action_words(line.data)))
    found.sort(key=lambda mark: mark[0])
    return tuple(TimelineMark(n, t, words) for n, (t, words) in enumerate(found, start=1))


def _ms(values: tuple[float | None, ...]) -> tuple[float | None, ...]:
    return tuple(None if v is None else v * 1000 for v in values)


def _percent(values: tuple[float | None, ...]) -> tuple[float | None, ...]:
    return tuple(None if v is None else v * 100 for v in values)


def _load_steps(recording: Recording, start_s: float) -> Series:
    """The probe's concurrency as a step line (0 while stopped or paused; rate mode: a gap)."""
    x: list[float] = [0.0]
    y: list[float | None] = [0.0]
    for event in recording.probe_events():
        if event.kind in (EventKind.STOPPED, EventKind.WORKER_EXITED):
            value: float | None = 0.0
        elif event.kind not in LOAD_STEP_KINDS:
            continue  # how the probe kept up, not a change of its load
        elif event.mode == "closed":
            value = float(event.concurrency or 0)
        else:
            value = None
        x.append(event.at_s - start_s)
        y.append(value)
    x.append(recording.last_t_s - start_s)
    y.append(y[-1])
    return Series("probe concurrency", tuple(x), tuple(y), step=True)


def _client_latencies(recording: Recording, start_s: float) -> tuple[Series, Series]:
    """Each request's TTFT and TPOT ((e2e − TTFT) / (tokens − 1)), at its end, as dots."""
    ends: list[float] = []
    ttft: list[float | None] = []
    tpot: list[float | None] = []
    for rows in recording.probe_rows():
        for record in rows.records:
            if record.error is not None or record.ttft_s is None:
                continue
            ends.append(record.done_at_s - start_s)
            ttft.append(record.ttft_s * 1000)
            tokens = record.output_tokens or record.chunk_count
            gap = (
                (record.e2e_s - record.ttft_s) / (tokens - 1) * 1000
                if record.e2e_s is not None and tokens > 1
                else None
            )
            tpot.append(gap)
    return (
        Series("TTFT per request (client)", tuple(ends), tuple(ttft), ".", faint=True),
        Series("TPOT per request (client)", tuple(ends), tuple(tpot), ".", faint=True),
    )


def timeline_figure(
    recording: Recording,
    series: ReplicaSeries,
    *,
    ttft_target_s: float | None,
    itl_target_s: float | None,
    percentile_words: tuple[str, str] = ("p99", "p99"),
) -> TimelineFigure:
    """The session on one time axis: latencies against their targets, throughput and load, the
    KV cache and the queue; each action a labelled line, each measured sweep step a shaded span."""
    start = recording.header.started_at_s
    t = tuple(v - start for v in series.t_s)
    ttft_client, tpot_client = _client_latencies(recording, start)
    ttft_name, itl_name = percentile_words
    panels = (
        Panel(
            "TTFT (ms)",
            (ttft_client, Series(f"TTFT {ttft_name} (server)", t, _ms(series.ttft_s), "-")),
            ttft_target_s * 1000 if ttft_target_s is not None else None,
            f"SLO {ttft_target_s * 1000:g} ms" if ttft_target_s is not None else "",
        ),
        Panel(
            "inter-token (ms)",
            (tpot_client, Series(f"ITL {itl_name} (server)", t, _ms(series.itl_s), "-")),
            itl_target_s * 1000 if itl_target_s is not None else None,
            f"SLO {itl_target_s * 1000:g} ms" if itl_target_s is not None else "",
        ),
        Panel(
            "output tokens/s",
            (Series("output tokens/s (server)", t, series.tokens_per_s, "-"),),
            zero_based=True,
            right=(_load_steps(recording, start),),
            right_label="requests in flight",
        ),
        Panel(
            "KV cache used (%)",
            (Series("KV cache used", t, _percent(series.kv_usage_ratio), "-"),),
            zero_based=True,
            right=(
                Series("running", t, series.running, "-", faint=True),
                Series("waiting", t, series.waiting, "--", faint=True),
            ),
            right_label="requests",
        ),
    )
    marks = tuple(Mark(mark.t_s - start, str(mark.number)) for mark in timeline_marks(recording))
    spans = []
    for line in recording.of_kind("action"):
        step = line.data.get("step") if line.data.get("action") == "sweep_step" else None
        if isinstance(step, Mapping) and isinstance(step.get("started_at_s"), int | float):
            begin = float(step["started_at_s"]) - start
            spans.append(
                Span(begin, begin + float(step.get("measured_s") or 0), f"c={step['concurrency']}")
            )
    title = f"slotop {recording.header.command} session, {recording.header.replica.get('url', '')}"
    return TimelineFigure(title.rstrip(", "), panels, marks, tuple(spans))
