"""What each pane shows, built by pure functions from the app's inputs; equal views skip a repaint.

The app keeps one frozen `Inputs` (the newest data of every source plus UI choices) and, on every
change, builds every pane's view here. A pane whose view did not change is not redrawn.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from slotop import fmt
from slotop.actions.budget.kv import BudgetError, CapacityChange, expected_capacity_change
from slotop.actions.budget.sglang import (
    SGLANG_FP8,
    model_dtype_of_server,
    sglang_capacity_change,
)
from slotop.actions.slo import (
    Diagnosis,
    SloThresholds,
    kv_full,
)
from slotop.collectors.engines import engine_label, kv_unit, preemption_words, serves
from slotop.collectors.gpu.reader import GpuDevice
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.snapshot import Snapshot, shown_gpu
from slotop.tui.messages import LatencyTrend, TimelineEvent
from slotop.tui.views.header import HeaderView, header_view
from slotop.tui.views.inputs import EVENTS_KEPT, Inputs, chosen_window, snapshot_of
from slotop.tui.views.load import CurveView, ProbePaneView, all_points, curve_view, probe_view
from slotop.tui.views.slo import SloView, slo_view
from slotop.tui.views.verdict import LitmusItem, diagnose, litmus


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
    """One line per GPU, or why there is none; `simulated`: the simulated replica's, not NVML's;
    `names`: each line's device name where the line ends with it (the pane may shorten it)."""

    lines: tuple[str, ...]
    available: bool
    simulated: bool = False
    names: tuple[str, ...] = ()


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


def _bucket_range(estimate: QuantileEstimate | None) -> str:
    """The bucket a server quantile fell in, which is all the histogram really knows."""
    if estimate is None:
        return fmt.NA
    if estimate.at_floor:
        return f"≤{fmt.ms(estimate.bucket_upper).removesuffix(' ms')}"
    if estimate.clamped:
        return f">{fmt.ms(estimate.bucket_lower).removesuffix(' ms')}"
    low = "0" if estimate.bucket_lower == 0 else fmt.ms(estimate.bucket_lower).removesuffix(" ms")
    return f"{low}–{fmt.ms(estimate.bucket_upper).removesuffix(' ms')}"


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
    snapshot = snapshot_of(inputs)
    engine = snapshot.replica.engine if snapshot is not None else "vllm"
    if stats is not None and not serves(engine, "prefill"):
        phases = (
            f"prefill, decode: {engine_label(engine)} has no such metric · queue p99 "
            f"{_bucket_range(stats.queue_s.p99)} ms (buckets)"
        )
    elif stats is not None:
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
        ttft_target_s=slo.ttft_s,
        itl_target_s=slo.itl_s,
        markers=_trimmed_marks(_markers(trend, inputs.events)),
        phases=phases,
    )


def kv_view(inputs: Inputs) -> KvView:
    """Block occupancy, queues, preemptions, prefix hits and what the cache config says it holds."""
    snapshot = snapshot_of(inputs)
    stats = chosen_window(inputs)
    if snapshot is None or stats is None:
        na = fmt.NA
        return KvView(None, f"blocks {na}", f"running {na}  waiting {na}", na, na, na, na)
    kv, requests = snapshot.kv, snapshot.requests
    engine = snapshot.replica.engine
    unit = kv_unit(engine, kv.block_size_tokens)[1]
    preempt = preemption_words(engine)[0]
    budget = (
        f"fits {fmt.number(kv.max_concurrency, 1)} seqs at max context ({kv.cache_dtype or 'N/A'}),"
        f" {fmt.number(kv.size_tokens)} tokens"
    )
    return KvView(
        usage_ratio=kv.usage_ratio,
        blocks=f"{fmt.number(kv.blocks_used)} / {fmt.number(kv.blocks_total)} {unit} "
        f"{fmt.percent(kv.usage_ratio)}",
        queues=f"running {fmt.number(requests.running)}  waiting {fmt.number(requests.waiting)}",
        preemptions=f"{preempt} {fmt.number(stats.preemptions_per_s, 2, '/s')}",
        hit_ratio=f"prefix hit {fmt.percent(stats.prefix_cache_hit_ratio)}",
        budget=budget,
        fp8_budget=_fp8_words(snapshot),
        full=kv_full(kv.usage_ratio, SloThresholds.from_settings(inputs.settings)),
    )


def _fp8_words(snapshot: Snapshot) -> str:
    """What an fp8 KV cache would hold, scaled from this cache (N/A where it does not say):
    vLLM's blocks, or SGLang's pool of tokens (its fp8 is fp8_e5m2), held at the cap its
    /get_server_info names."""
    kv, replica = snapshot.kv, snapshot.replica
    sglang = replica.engine == "sglang"
    fp8 = SGLANG_FP8 if sglang else "fp8"
    if kv.cache_dtype is not None and kv.cache_dtype.startswith("fp8"):
        return f"already {kv.cache_dtype}"
    model_dtype = model_dtype_of_server(replica.model_dtype) if sglang else None
    change: CapacityChange
    try:
        if sglang:
            change = sglang_capacity_change(
                kv,
                fp8,
                model_dtype=model_dtype,
                max_total_tokens=replica.kv_tokens_cap,
                cap_known=replica.kv_cache_dtype is not None,
            )
        else:
            change = expected_capacity_change(kv, fp8)
    except BudgetError as exc:
        return f"with {fp8}: N/A ({exc})"
    seqs = change.seqs_at_max_context_after
    caveat = f"×{change.ratio:.3g}"
    if change.basis in ("capped", "at least"):
        caveat += ", held at --max-total-tokens"
    elif sglang and not change.cap_known and change.to_bytes < change.from_bytes:
        caveat += " unless capped"
    if change.from_dtype == "auto" and model_dtype is None:
        caveat += ", auto taken as 16-bit"
    return (
        f"with {fp8}: {fmt.number(seqs, 1)} seqs at {'context' if sglang else 'max context'}, "
        f"{fmt.number(change.tokens_after)} tokens ({caveat})"
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


SIMULATED_GPU = "SIMULATED"
"""The word that marks the simulated replica's modelled GPUs, as the header marks the demo."""


def _simulated_line(device: GpuDevice) -> str:
    """A modelled GPU: what the sim knows (no clocks, temperature or throttling to show)."""
    util = fmt.NA if device.gpu_util_pct is None else f"{device.gpu_util_pct}%"
    power = fmt.number(device.power_draw_w, 0)
    return (
        f"{SIMULATED_GPU} GPU{device.index if device.index is not None else '?'} {util} util  "
        f"{fmt.gib(device.memory_used_bytes)}/{fmt.gib(device.memory_total_bytes)}  "
        f"{power}/{fmt.number(device.power_limit_w, 0, ' W')}  {device.name or ''}"
    ).rstrip()


def gpu_view(inputs: Inputs) -> GpuView:
    """A line per device, or the reason none is visible; the simulated replica's GPUs where NVML
    reads none, each line marked SIMULATED."""
    shown = shown_gpu(inputs.gpu, snapshot_of(inputs))
    if shown is None:
        return GpuView(("GPU not read yet",), False)
    gpu = shown.gpu
    if shown.simulated:
        lines = tuple(_simulated_line(d) for d in gpu.devices)
        return GpuView(lines, True, True, tuple(d.name or "" for d in gpu.devices))
    if not gpu.visible:
        return GpuView((gpu.unavailable_reason or "no GPU visible",), False)
    return GpuView(tuple(_device_line(d) for d in gpu.devices) or ("no GPU selected",), True)


def build_views(inputs: Inputs) -> Views:
    """Every pane's view from the inputs."""
    slo = inputs.settings.slo
    thresholds = SloThresholds.from_settings(inputs.settings)
    snapshot = snapshot_of(inputs)
    slo_pane = slo_view(inputs)
    gpu = shown_gpu(inputs.gpu, snapshot)
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
                gpu=gpu.gpu if gpu is not None else None,
                gpu_simulated=gpu is not None and gpu.simulated,
                slo_verdict=slo_pane.verdict,
                curve=all_points(inputs),
                ttft_target_s=slo.ttft_s,
                itl_target_s=slo.itl_s,
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
