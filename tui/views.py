"""What each pane shows, built by pure functions from the app's inputs; equal views skip a repaint.

The app keeps one frozen `Inputs` (the newest data of every source plus UI choices) and, on every
change, builds every pane's view here. A pane whose view did not change is not redrawn.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

from slotop import fmt
from slotop.actions.budget.kv import BudgetError, expected_capacity_change
from slotop.actions.slo import (
    Diagnosis,
    SloThresholds,
    Verdict,
    counting_failures,
    failures_allow,
    judge_estimate,
    kv_full,
    overall,
)
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.collectors.gpu.reader import GpuDevice, GpuSnapshot
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.poller import PollResult
from slotop.collectors.probe.stats import ProbeStats
from slotop.collectors.snapshot import Snapshot, WindowStats, uptime_s
from slotop.config import Settings
from slotop.tui.curve import CurvePoint, curve_operating_point
from slotop.tui.messages import LatencyTrend, ProbeView, TimelineEvent
from slotop.tui.sweeping import merged_curve, progress_words, sweep_points
from slotop.tui.verdict import LitmusItem, diagnose, gap_unexplained, litmus

EVENTS_KEPT = 200
STALE_AFTER_INTERVALS = 3.0


@dataclass(frozen=True, slots=True)
class Inputs:
    """The newest data from every source and the operator's display choices."""

    settings: Settings
    now_s: float
    started_s: float
    poll: PollResult[Snapshot] | None = None
    last_poll_at_s: float | None = None
    trend: LatencyTrend = field(default_factory=LatencyTrend)
    gpu: GpuSnapshot | None = None
    probe: ProbeView = field(default_factory=lambda: ProbeView(running=False))
    curve: tuple[CurvePoint, ...] = ()
    events: tuple[TimelineEvent, ...] = ()
    short_window: bool = False
    paused: bool = False
    simulated: bool = False
    sweep_progress: SweepProgress | None = None
    sweep_result: SweepResult | None = None
    sweeping: bool = False
    limits: tuple[int | None, int | None] = (None, None)
    unavailable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class HeaderView:
    """Who the replica is and whether the data is fresh."""

    title: str
    cache: str
    freshness: str
    state: str  # "fresh", "stale", "waiting" or "paused"


@dataclass(frozen=True, slots=True)
class SloRow:
    """One target: server and client values at its percentile, and the verdict."""

    name: str
    target: str
    server: str
    bucket: str
    client: str
    verdict: Verdict
    gap: bool


@dataclass(frozen=True, slots=True)
class SloView:
    """The SLO at a glance; stale data gives no verdict (UNKNOWN, `stale`), and `note` says why
    a verdict is not what the latencies alone would give."""

    verdict: Verdict
    window: str
    rows: tuple[SloRow, ...]
    samples: str
    goodput: str
    stale: bool = False
    note: str = ""


@dataclass(frozen=True, slots=True)
class LatencyView:
    """Percentile series over time with the targets, and prefill vs decode."""

    ttft: tuple[tuple[str, tuple[float | None, ...]], ...]
    itl: tuple[tuple[str, tuple[float | None, ...]], ...]
    ttft_target_s: float
    itl_target_s: float
    markers: tuple[bool, ...]
    phases: str


@dataclass(frozen=True, slots=True)
class KvView:
    """KV-cache occupancy, the scheduler's queues and the budget."""

    usage_ratio: float | None
    blocks: str
    queues: str
    preemptions: str
    hit_ratio: str
    budget: str
    fp8_budget: str
    full: bool = False


@dataclass(frozen=True, slots=True)
class ThroughputView:
    """Tokens and requests per second."""

    line: str


@dataclass(frozen=True, slots=True)
class GpuView:
    """One line per GPU, or why there is none."""

    lines: tuple[str, ...]
    available: bool


@dataclass(frozen=True, slots=True)
class ProbePaneView:
    """The load probe's state and counters."""

    state: str
    level: str
    counts: str
    errors: str
    running: bool
    sweep: str = ""


@dataclass(frozen=True, slots=True)
class CurveView:
    """p-latency against concurrency, with targets and the recommended point."""

    points: tuple[CurvePoint, ...]
    ttft_target_s: float
    itl_target_s: float
    recommended: int | None
    note: str
    header: str


@dataclass(frozen=True, slots=True)
class LitmusView:
    """The method's four litmus tests."""

    items: tuple[LitmusItem, ...]


@dataclass(frozen=True, slots=True)
class EventsView:
    """The timeline, newest last."""

    lines: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class Views:
    """Every pane's view."""

    header: HeaderView
    slo: SloView
    latency: LatencyView
    kv: KvView
    throughput: ThroughputView
    gpu: GpuView
    probe: ProbePaneView
    curve: CurveView
    litmus: LitmusView
    diagnosis: Diagnosis
    events: EventsView = field(default_factory=lambda: EventsView(()))


def _snapshot(inputs: Inputs) -> Snapshot | None:
    return inputs.poll.value if inputs.poll is not None else None


def chosen_window(inputs: Inputs) -> WindowStats | None:
    """The window the operator picked (`w`), None before the first scrape."""
    snapshot = _snapshot(inputs)
    if snapshot is None:
        return None
    if inputs.short_window and snapshot.short_window is not None:
        return snapshot.short_window
    return snapshot.window


def chosen_probe_stats(inputs: Inputs) -> ProbeStats | None:
    """Client stats over the same window as the server's."""
    probe = inputs.probe
    return probe.short_stats if inputs.short_window else probe.long_stats


def stale_reason(inputs: Inputs) -> str | None:
    """Why the replica's data is stale (the last poll failed, or none answered for too long);
    None while it is fresh or before the first poll."""
    if inputs.poll is None:
        return None
    if inputs.poll.stale:
        return str(inputs.poll.error)
    age = inputs.now_s - (inputs.last_poll_at_s or inputs.now_s)
    limit = STALE_AFTER_INTERVALS * inputs.settings.replica.scrape_interval_s
    if age > limit + inputs.settings.replica.timeout_s:
        return f"no answer for {fmt.duration(age)}"
    return None


def header_view(inputs: Inputs) -> HeaderView:
    """Model, vLLM version, URL, cache shape, uptime, and freshness with the reason."""
    snapshot = _snapshot(inputs)
    url = inputs.settings.replica.url
    sim = "SIMULATED replica (slotop demo)  " if inputs.simulated else ""
    attached = fmt.coarse_duration(inputs.now_s - inputs.started_s)
    if snapshot is None:
        title = "model N/A  vLLM N/A"
        cache = f"{sim}{url}  KV N/A  attached {attached}"
    else:
        replica, kv = snapshot.replica, snapshot.kv
        title = f"{replica.model_name or 'model N/A'}  vLLM {replica.vllm_version or 'N/A'}"
        cache = (
            f"{sim}{replica.url or url}  KV {kv.cache_dtype or 'N/A'}  block "
            f"{fmt.number(kv.block_size_tokens)} tok  {fmt.number(kv.blocks_total)} blocks  "
            f"{fmt.uptime(uptime_s(replica.started_at_s, inputs.now_s))}  attached {attached}"
        )
    if inputs.paused:
        return HeaderView(title, cache, "PAUSED (p resumes)", "paused")
    if inputs.poll is None:
        return HeaderView(title, cache, "waiting for the first scrape…", "waiting")
    reason = stale_reason(inputs)
    if reason is not None:
        return HeaderView(title, cache, f"STALE: {reason}", "stale")
    return HeaderView(title, cache, "fresh", "fresh")


def _bucket(estimate: QuantileEstimate | None, target_s: float) -> str:
    if estimate is None:
        return ""
    if estimate.clamped:
        bucket = f"bucket >{fmt.ms(estimate.bucket_lower)}"
    else:
        bucket = f"bucket {fmt.ms(estimate.bucket_lower)}–{fmt.ms(estimate.bucket_upper)}"
    return bucket + (" holds the target" if estimate.bucket_within(target_s) is None else "")


def _bucket_range(estimate: QuantileEstimate | None) -> str:
    """The bucket a server quantile fell in, which is all the histogram really knows."""
    if estimate is None:
        return fmt.NA
    if estimate.clamped:
        return f">{fmt.ms(estimate.bucket_lower)}"
    low = "0" if estimate.bucket_lower == 0 else fmt.ms(estimate.bucket_lower).removesuffix(" ms")
    return f"{low}–{fmt.ms(estimate.bucket_upper).removesuffix(' ms')}"


def _server_value(estimate: QuantileEstimate | None) -> str:
    if estimate is None:
        return fmt.NA
    return (">" if estimate.clamped else "") + fmt.ms(estimate.value)


def slo_view(inputs: Inputs) -> SloView:
    """Server and client pXX against the targets over the chosen window."""
    slo = inputs.settings.slo
    stats = chosen_window(inputs)
    client = chosen_probe_stats(inputs)
    rows: list[SloRow] = []
    for name, key, percentile, target_ms in (
        ("TTFT", "ttft", slo.ttft_percentile, slo.ttft_ms),
        ("ITL", "itl", slo.itl_percentile, slo.itl_ms),
    ):
        server = getattr(stats, f"{key}_s").at(percentile) if stats is not None else None
        summary = getattr(client, key) if client is not None else None
        client_s = summary.at(percentile) if summary is not None else None
        verdict = judge_estimate(server, target_ms / 1e3, client_s)
        if client is not None:
            verdict = counting_failures(
                verdict, percentile, client.requests_ok, client.requests_failed
            )
        rows.append(
            SloRow(
                name=f"{name} {fmt.percentile_name(percentile)}",
                target=f"< {fmt.ms(target_ms / 1e3)}",
                server=_server_value(server),
                bucket=_bucket(server, target_ms / 1e3),
                client=fmt.ms(client_s) if inputs.probe.running or client_s else "probe off",
                verdict=verdict,
                gap=gap_unexplained(
                    client_s, server, summary.interval(percentile) if summary else None
                ),
            )
        )
    if stats is None:
        window = "no window yet"
    elif stats.covered_s is None:
        window = "totals since the replica started"
    else:
        name = "short" if inputs.short_window else "long"
        requested = stats.requested_s or 0.0
        if stats.covered_s >= requested:
            window = f"{name} window {fmt.number(requested)} s"
        else:
            window = f"{name} window {fmt.number(stats.covered_s)} of {fmt.number(requested)} s"
    server_count = stats.ttft_s.count if stats is not None else None
    client_count = client.requests_ok if client is not None else None
    samples = f"n server {fmt.number(server_count)}  client {fmt.number(client_count)}"
    good = client.goodput if client is not None else None
    goodput = (
        f"goodput {fmt.percent(good.ratio)} ({fmt.number(good.rate_rps, 2)} req/s)"
        if good is not None
        else "goodput N/A (probe off)"
    )
    reason = stale_reason(inputs)
    if reason is not None:
        return SloView(
            Verdict.UNKNOWN,
            window,
            tuple(rows),
            samples,
            goodput,
            stale=True,
            note="stale data: no verdict until a scrape succeeds",
        )
    return SloView(
        overall(tuple(r.verdict for r in rows)),
        window,
        tuple(rows),
        samples,
        goodput,
        note=_failures_note(client, (slo.ttft_percentile, slo.itl_percentile)),
    )


def _failures_note(client: ProbeStats | None, percentiles: tuple[float, ...]) -> str:
    """Say when failed requests alone break a target, as they count against it."""
    if client is None or not client.requests_failed:
        return ""
    ended = client.requests_ok + client.requests_failed
    strictest = max(percentiles)
    if failures_allow(strictest, client.requests_ok, client.requests_failed):
        return ""
    return (
        f"failed {client.requests_failed:,} of {ended:,}: "
        f"{fmt.percentile_name(strictest)} allows {100 - strictest:g}%"
    )


def _markers(trend: LatencyTrend, events: tuple[TimelineEvent, ...]) -> tuple[bool, ...]:
    """Mark each trend point that has an action between it and the point before."""
    marks: list[bool] = []
    previous = float("-inf")
    actions = [e.at_s for e in events if e.kind in ("load", "action", "sweep", "restart")]
    for time_s in trend.times_s:
        marks.append(any(previous < at <= time_s for at in actions))
        previous = time_s
    return tuple(marks)


def _trimmed(values: tuple[float | None, ...]) -> tuple[float | None, ...]:
    """Drop leading gaps: they draw as blanks either way, and an idle trend then stays equal."""
    for index, value in enumerate(values):
        if value is not None:
            return values[index:]
    return ()


def _trimmed_marks(marks: tuple[bool, ...]) -> tuple[bool, ...]:
    """Drop leading unmarked points, for the same reason."""
    return marks[marks.index(True) :] if True in marks else ()


def latency_view(inputs: Inputs) -> LatencyView:
    """Server p50/p90/p99 series, the targets, action markers and prefill vs decode."""
    trend, slo = inputs.trend, inputs.settings.slo
    stats = chosen_window(inputs)
    phases = "prefill N/A  decode N/A"
    if stats is not None:
        phases = (
            f"prefill p50 {_bucket_range(stats.prefill_s.p50)} p99 "
            f"{_bucket_range(stats.prefill_s.p99)} · decode p50 {_bucket_range(stats.decode_s.p50)}"
            f" p99 {_bucket_range(stats.decode_s.p99)} · queue p99 {_bucket_range(stats.queue_s.p99)}"
            " ms (buckets)"
        )
    return LatencyView(
        ttft=(
            ("p50", _trimmed(trend.ttft_p50_s)),
            ("p90", _trimmed(trend.ttft_p90_s)),
            ("p99", _trimmed(trend.ttft_p99_s)),
        ),
        itl=(
            ("p50", _trimmed(trend.itl_p50_s)),
            ("p90", _trimmed(trend.itl_p90_s)),
            ("p99", _trimmed(trend.itl_p99_s)),
        ),
        ttft_target_s=slo.ttft_ms / 1e3,
        itl_target_s=slo.itl_ms / 1e3,
        markers=_trimmed_marks(_markers(trend, inputs.events)),
        phases=phases,
    )


def kv_view(inputs: Inputs) -> KvView:
    """Block occupancy, queues, preemptions, prefix hits and what the cache config says it holds."""
    snapshot = _snapshot(inputs)
    stats = chosen_window(inputs)
    if snapshot is None or stats is None:
        na = fmt.NA
        return KvView(None, f"blocks {na}", f"running {na}  waiting {na}", na, na, na, na)
    kv, requests = snapshot.kv, snapshot.requests
    budget = (
        f"fits {fmt.number(kv.max_concurrency, 1)} seqs at max context ({kv.cache_dtype or 'N/A'}),"
        f" {fmt.number(kv.size_tokens)} tokens"
    )
    return KvView(
        usage_ratio=kv.usage_ratio,
        blocks=f"{fmt.number(kv.blocks_used)} / {fmt.number(kv.blocks_total)} blocks "
        f"{fmt.percent(kv.usage_ratio)}",
        queues=f"running {fmt.number(requests.running)}  waiting {fmt.number(requests.waiting)}",
        preemptions=f"preempt {fmt.number(stats.preemptions_per_s, 2, '/s')}",
        hit_ratio=f"prefix hit {fmt.percent(stats.prefix_cache_hit_ratio)}",
        budget=budget,
        fp8_budget=_fp8_words(snapshot),
        full=kv_full(kv.usage_ratio, SloThresholds.from_settings(inputs.settings)),
    )


def _fp8_words(snapshot: Snapshot) -> str:
    """What an fp8 KV cache would hold, scaled from this cache (N/A where it does not say)."""
    kv = snapshot.kv
    if kv.cache_dtype is not None and kv.cache_dtype.startswith("fp8"):
        return f"already {kv.cache_dtype}"
    try:
        change = expected_capacity_change(kv, "fp8")
    except BudgetError as exc:
        return f"with fp8: N/A ({exc})"
    seqs = change.seqs_at_max_context_after
    return (
        f"with fp8: {fmt.number(seqs, 1)} seqs at max context, "
        f"{fmt.number(change.tokens_after)} tokens (×{change.ratio:g}"
        + (", auto taken as 16-bit)" if change.from_dtype == "auto" else ")")
    )


def throughput_view(inputs: Inputs) -> ThroughputView:
    """Prompt and generation tokens per second, requests per second."""
    stats = chosen_window(inputs)
    if stats is None:
        return ThroughputView("prompt N/A tok/s  gen N/A tok/s  N/A req/s")
    return ThroughputView(
        f"prompt {fmt.number(stats.prompt_tokens_per_s)} tok/s  "
        f"gen {fmt.number(stats.generation_tokens_per_s)} tok/s  "
        f"{fmt.number(stats.requests_per_s, 2)} req/s"
    )


def _device_line(device: GpuDevice) -> str:
    throttle = ",".join(device.throttle_reasons) if device.throttle_reasons else "none"
    if device.throttle_reasons is None:
        throttle = fmt.NA
    util = fmt.NA if device.gpu_util_pct is None else f"{device.gpu_util_pct}%"
    temp = fmt.NA if device.temperature_c is None else f"{device.temperature_c}°C"
    clock = fmt.NA if device.sm_clock_mhz is None else f"{device.sm_clock_mhz} MHz"
    power = fmt.number(device.power_draw_w, 0, " W")
    return (
        f"GPU{device.index if device.index is not None else '?'} {util} util  "
        f"{fmt.gib(device.memory_used_bytes)}/{fmt.gib(device.memory_total_bytes)}  {power}  "
        f"{clock}  {temp}  throttle {throttle}"
    )


def gpu_view(inputs: Inputs) -> GpuView:
    """A line per device, or the reason none is visible."""
    gpu = inputs.gpu
    if gpu is None:
        return GpuView(("GPU not read yet",), False)
    if not gpu.visible:
        return GpuView((gpu.unavailable_reason or "no GPU visible",), False)
    return GpuView(tuple(_device_line(d) for d in gpu.devices) or ("no GPU selected",), True)


def probe_view(inputs: Inputs) -> ProbePaneView:
    """On/off, the dial, in-flight and completed counts, errors by class, and any sweep."""
    pane = _probe_view(inputs)
    sweep = progress_words(inputs.sweep_progress, inputs.sweep_result)
    return dataclasses.replace(pane, sweep=sweep) if sweep else pane


def _probe_view(inputs: Inputs) -> ProbePaneView:
    view = inputs.probe
    status = view.status
    errors = "  ".join(f"{name} {count}" for name, count in view.errors) or "none"
    if not view.running:
        return ProbePaneView("off (l turns it on)", "", "", f"errors {errors}", False)
    if status is None:
        return ProbePaneView("starting…", "", "", f"errors {errors}", True)
    level = (
        f"concurrency {status.target_concurrency}"
        if status.mode == "closed"
        else f"rate {fmt.number(status.rate_rps, 2)} req/s"
    )
    counts = (
        f"in flight {status.in_flight}  done {status.done_total:,}  failed {status.failed_total:,}"
    )
    return ProbePaneView("ON", level, counts, f"errors {errors}", True)


def curve_view(inputs: Inputs) -> CurveView:
    """The curve's points with the targets and the recommended concurrency."""
    slo = inputs.settings.slo
    ttft_t, itl_t = slo.ttft_ms / 1e3, slo.itl_ms / 1e3
    curve = all_points(inputs)
    point = curve_operating_point(curve, ttft_t, itl_t)
    swept = inputs.sweep_result
    if swept is not None and swept.stop is not None:
        chosen = swept.recommendation.concurrency
        note = (
            f"sweep recommends concurrency {chosen}: {swept.recommendation.binding_detail}"
            if chosen is not None
            else f"sweep: {swept.recommendation.binding_detail}"
        )
        return CurveView(curve, ttft_t, itl_t, chosen, note, _curve_header(inputs))
    if not curve:
        note = "no points yet: turn the probe on (l) and step it (+/-), or sweep (s)"
    elif point.concurrency is None:
        note = "no step meets both targets"
    elif point.bent:
        note = f"recommended concurrency {point.concurrency} (one step below the bend)"
    else:
        note = f"all steps pass up to {point.concurrency}; keep stepping until p99 bends"
    return CurveView(curve, ttft_t, itl_t, point.concurrency, note, _curve_header(inputs))


def _curve_header(inputs: Inputs) -> str:
    """Column names with each target, so red and green on the rows need no legend."""
    slo = inputs.settings.slo
    ttft = f"TTFT {fmt.percentile_name(slo.ttft_percentile)}<{fmt.ms(slo.ttft_ms / 1e3)}"
    itl = f"ITL {fmt.percentile_name(slo.itl_percentile)}<{fmt.ms(slo.itl_ms / 1e3)}"
    return f"conc  {ttft:>15}  {itl:>15}     n"


def all_points(inputs: Inputs) -> tuple[CurvePoint, ...]:
    """The manual steps' points and the sweep's, on one curve."""
    return merged_curve(inputs.curve, sweep_points(inputs.sweep_result))


def build_views(inputs: Inputs) -> Views:
    """Every pane's view from the inputs."""
    slo = inputs.settings.slo
    thresholds = SloThresholds.from_settings(inputs.settings)
    snapshot = _snapshot(inputs)
    slo_pane = slo_view(inputs)
    return Views(
        header=header_view(inputs),
        slo=slo_pane,
        latency=latency_view(inputs),
        kv=kv_view(inputs),
        throughput=throughput_view(inputs),
        gpu=gpu_view(inputs),
        probe=probe_view(inputs),
        curve=curve_view(inputs),
        litmus=LitmusView(
            litmus(
                ttft_percentile=slo.ttft_percentile,
                itl_percentile=slo.itl_percentile,
                slo_source=inputs.settings.source,
                snapshot=snapshot,
                gpu=inputs.gpu,
                slo_verdict=slo_pane.verdict,
                curve=all_points(inputs),
                ttft_target_s=slo.ttft_ms / 1e3,
                itl_target_s=slo.itl_ms / 1e3,
                thresholds=thresholds,
            )
        ),
        diagnosis=diagnose(snapshot, chosen_window(inputs), *inputs.limits, thresholds=thresholds),
        events=EventsView(
            tuple(
                (time.strftime("%H:%M:%S", time.localtime(e.at_s)), e.kind, e.text)
                for e in inputs.events[-EVENTS_KEPT:]
            )
        ),
    )
