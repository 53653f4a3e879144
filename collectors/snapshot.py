"""The frozen Snapshot of one replica, built by a pure function from window views and a reading.

Units are in field names; None means the replica did not say (never 0). Quantiles carry how
coarse they are: the bucket they were interpolated in and how many observations fed them. The
simulated replica's modelled GPUs come as a GpuSnapshot of their own, marked simulated wherever
they are shown (`shown_gpu`), and only where NVML reads no real GPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.names import Engine
from slotop.collectors.reading import ENGINE_LABEL, CacheConfig, Reading, gauge_total, gauge_totals
from slotop.collectors.sim_gpu import simulated_gpu
from slotop.collectors.window import WindowView

STANDARD_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0)
LATENCY_KEYS: tuple[str, ...] = ("ttft", "itl", "e2e", "queue", "prefill", "decode")

_T = TypeVar("_T")
_N = TypeVar("_N", int, float)


@dataclass(frozen=True, slots=True)
class LatencyQuantiles:
    """Quantiles of one latency histogram over a window, in seconds, by percentile."""

    percentiles: tuple[tuple[float, QuantileEstimate | None], ...]
    configured_percentile: float | None
    count: float | None
    mean_s: float | None

    def at(self, percentile: float) -> QuantileEstimate | None:
        """Return the estimate at a percentile computed for this snapshot, None otherwise."""
        for known, estimate in self.percentiles:
            if known == percentile:
                return estimate
        return None

    @property
    def p50(self) -> QuantileEstimate | None:
        """Return the median."""
        return self.at(50.0)

    @property
    def p90(self) -> QuantileEstimate | None:
        """Return the 90th percentile."""
        return self.at(90.0)

    @property
    def p99(self) -> QuantileEstimate | None:
        """Return the 99th percentile."""
        return self.at(99.0)

    @property
    def configured(self) -> QuantileEstimate | None:
        """Return the estimate at the SLO's percentile, None when none is configured."""
        if self.configured_percentile is None:
            return None
        return self.at(self.configured_percentile)


@dataclass(frozen=True, slots=True)
class WindowStats:
    """Rates and latency quantiles over one window; `covered_s` None means since start."""

    requested_s: float | None
    covered_s: float | None
    ttft_s: LatencyQuantiles
    itl_s: LatencyQuantiles
    e2e_s: LatencyQuantiles
    queue_s: LatencyQuantiles
    prefill_s: LatencyQuantiles
    decode_s: LatencyQuantiles
    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    requests_per_s: float | None
    preemptions_per_s: float | None
    requests_finished: float | None
    preemptions: float | None
    prefix_cache_hit_ratio: float | None


@dataclass(frozen=True, slots=True)
class RequestCounts:
    """Requests the scheduler holds now, summed across engines."""

    running: float | None
    waiting: float | None
    waiting_by_reason: tuple[tuple[str, float], ...]
    swapped: float | None


@dataclass(frozen=True, slots=True)
class KvCacheState:
    """KV-cache occupancy now, and the cache's shape from `vllm:cache_config_info`."""

    usage_ratio: float | None
    usage_ratio_by_engine: tuple[tuple[str, float], ...]
    block_size_tokens: int | None
    blocks_total: int | None
    blocks_used: int | None
    blocks_free: int | None
    cache_dtype: str | None
    size_tokens: int | None
    max_concurrency: float | None
    gpu_memory_utilization: float | None


@dataclass(frozen=True, slots=True)
class ReplicaInfo:
    """Who the replica is: where, which model, engine (vLLM or SGLang) and version, since when
    (Unix time), and its health; `kv_cache_dtype` where the server says it of itself (SGLang's
    `/get_server_info`; vLLM says it in its metrics)."""

    url: str | None = None
    model_name: str | None = None
    served_models: tuple[str, ...] = ()
    version: str | None = None
    healthy: bool | None = None
    health_detail: str | None = None
    engine_generation: str | None = None
    engines: int | None = None
    started_at_s: float | None = None
    engine: Engine = "vllm"
    kv_cache_dtype: str | None = None
    model_dtype: str | None = None
    kv_tokens_cap: int | None = None
    """SGLang's `--dtype` (as given) and `--max-total-tokens`, read with `kv_cache_dtype`: where
    that is set, None here means the server set none."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything slotop knows about one replica at one moment; None where the replica is silent."""

    taken_at_s: float
    replica: ReplicaInfo
    requests: RequestCounts
    kv: KvCacheState
    window: WindowStats
    short_window: WindowStats | None
    missing: tuple[str, ...]
    unknown: tuple[str, ...]
    notes: tuple[str, ...] = ()
    simulated_gpu: GpuSnapshot | None = None


def _percentiles(configured: float | None) -> tuple[float, ...]:
    extra = () if configured is None or configured in STANDARD_PERCENTILES else (configured,)
    return tuple(sorted((*STANDARD_PERCENTILES, *extra)))


def latency_quantiles(
    view: WindowView, key: str, configured_percentile: float | None
) -> LatencyQuantiles:
    """Estimate the standard and configured percentiles of one histogram over a view."""
    delta = view.histogram(key)
    wanted = _percentiles(configured_percentile)
    if delta is None:
        return LatencyQuantiles(tuple((p, None) for p in wanted), configured_percentile, None, None)
    estimates = delta.quantiles([p / 100.0 for p in wanted])
    return LatencyQuantiles(
        percentiles=tuple(zip(wanted, estimates, strict=True)),
        configured_percentile=configured_percentile,
        count=delta.count,
        mean_s=delta.mean,
    )


def _hit_ratio(view: WindowView, reading: Reading) -> float | None:
    queries = view.increase("prefix_cache_queries")
    hits = view.increase("prefix_cache_hits")
    if queries is not None and hits is not None:
        return hits / queries if queries > 0 else None
    rate = gauge_total(reading, "prefix_cache_hit_rate")
    return rate if rate is not None and 0 <= rate <= 1 else None


def server_window_stats(
    view: WindowView,
    reading: Reading,
    ttft_percentile: float | None = None,
    itl_percentile: float | None = None,
) -> WindowStats:
    """The replica's own view of one window: rates and quantiles from its counters and
    histograms; the SLO percentiles are added to both."""
    configured = {"ttft": ttft_percentile, "itl": itl_percentile}
    quantiles = {key: latency_quantiles(view, key, configured.get(key)) for key in LATENCY_KEYS}
    return WindowStats(
        requested_s=view.requested_s,
        covered_s=view.covered_s,
        ttft_s=quantiles["ttft"],
        itl_s=quantiles["itl"],
        e2e_s=quantiles["e2e"],
        queue_s=quantiles["queue"],
        prefill_s=quantiles["prefill"],
        decode_s=quantiles["decode"],
        prompt_tokens_per_s=view.rate_per_s("prompt_tokens"),
        generation_tokens_per_s=view.rate_per_s("generation_tokens"),
        requests_per_s=view.rate_per_s("requests_finished"),
        preemptions_per_s=view.rate_per_s("preemptions"),
        requests_finished=view.increase("requests_finished"),
        preemptions=view.increase("preemptions"),
        prefix_cache_hit_ratio=_hit_ratio(view, reading),
    )


def request_counts(reading: Reading) -> RequestCounts:
    """Read running, waiting (by reason where exposed) and swapped requests."""
    by_reason = reading.gauges.get("requests_waiting_by_reason")
    reasons = gauge_totals(by_reason, by="reason") if by_reason else {}
    return RequestCounts(
        running=gauge_total(reading, "requests_running"),
        waiting=gauge_total(reading, "requests_waiting"),
        waiting_by_reason=tuple(sorted((r, v) for r, v in reasons.items() if r)),
        swapped=gauge_total(reading, "requests_swapped"),
    )


def _first(values: Iterable[_T | None]) -> _T | None:
    return next((value for value in values if value is not None), None)


def _config_for(engine: str, configs: tuple[CacheConfig, ...]) -> CacheConfig | None:
    """Return an engine's config, or the one config without an engine label (older vLLM)."""
    exact = next((config for config in configs if config.engine == engine), None)
    if exact is not None:
        return exact
    return configs[0] if len(configs) == 1 and not configs[0].engine else None


def _sum_all(values: list[_N | None]) -> _N | None:
    """Sum values when there is at least one and none is missing."""
    present = [value for value in values if value is not None]
    if not values or len(present) != len(values):
        return None
    total = present[0]
    for value in present[1:]:
        total += value
    return total


@dataclass(frozen=True, slots=True)
class KvBlocks:
    """KV blocks summed across engines, and the usage ratio over the blocks requests can take."""

    total: int
    used: int
    free: int
    usage_ratio: float


def kv_blocks(
    usage_by_engine: dict[str, float], configs: tuple[CacheConfig, ...], *, v0_engine: bool
) -> KvBlocks | None:
    """Turn usage per engine and each engine's block count into blocks; None unless all known.

    A v1 engine keeps one block aside (the null block) and reports usage over the others, so
    used = round(usage × (blocks − 1)) there and round(usage × blocks) on a v0 engine; free is
    what new requests could still take.
    """
    if not usage_by_engine:
        return None
    reserved = 0 if v0_engine else 1
    total = used = free = 0
    weighted = 0.0
    for engine, ratio in usage_by_engine.items():
        config = _config_for(engine, configs)
        if config is None or config.num_gpu_blocks is None:
            return None
        usable = max(config.num_gpu_blocks - reserved, 0)
        engine_used = min(max(round(ratio * usable), 0), usable)
        total += config.num_gpu_blocks
        used += engine_used
        free += usable - engine_used
        weighted += ratio * usable
    usable_total = used + free
    ratio_all = weighted / usable_total if usable_total else 0.0
    return KvBlocks(total, used, free, ratio_all)


def _sglang_kv_state(reading: Reading, cache_dtype: str | None) -> KvCacheState:
    """SGLang's cache in its own terms: pages of `page_size` tokens (1 unless set) out of
    `max_total_num_tokens`, the used share over the tokens running requests hold."""
    total_tokens = gauge_total(reading, "kv_total_tokens")
    used_tokens = gauge_total(reading, "kv_used_tokens")
    page = gauge_total(reading, "kv_page_size") or 1.0
    pages = gauge_total(reading, "kv_pages")
    if pages is None and total_tokens is not None:
        pages = total_tokens // page
    used_pages = None if used_tokens is None else math.ceil(used_tokens / page)
    ratio = gauge_total(reading, "kv_usage")
    if ratio is None and used_tokens is not None and total_tokens:
        ratio = used_tokens / total_tokens
    context = gauge_total(reading, "context_len")
    fits = total_tokens / context if total_tokens is not None and context else None
    return KvCacheState(
        usage_ratio=ratio,
        usage_ratio_by_engine=(),
        block_size_tokens=round(page),
        blocks_total=None if pages is None else round(pages),
        blocks_used=used_pages,
        blocks_free=(
            None if pages is None or used_pages is None else max(round(pages) - used_pages, 0)
        ),
        cache_dtype=cache_dtype,
        size_tokens=None if total_tokens is None else round(total_tokens),
        max_concurrency=fits,
        gpu_memory_utilization=None,
    )


def kv_cache_state(reading: Reading, cache_dtype: str | None = None) -> KvCacheState:
    """Combine KV usage per engine with the cache config into occupancy and the cache's shape.

    `cache_dtype` is what the server says of itself, for an engine whose metrics do not say it
    (SGLang); vLLM's own `cache_config_info` wins where it says one.
    """
    if reading.engine == "sglang":
        return _sglang_kv_state(reading, cache_dtype)
    usage_series = reading.gauges.get("kv_usage")
    usage = gauge_totals(usage_series, by=ENGINE_LABEL) if usage_series else {}
    configs = reading.cache_configs
    blocks = kv_blocks(usage, configs, v0_engine=reading.v0_engine)
    total: int | None
    used: int | None
    free: int | None
    ratio: float | None
    if blocks is not None:
        total, used, free, ratio = blocks.total, blocks.used, blocks.free, blocks.usage_ratio
    else:
        total = _sum_all([c.num_gpu_blocks for c in configs])
        used = free = None
        ratio = sum(usage.values()) / len(usage) if usage else None
    tokens = _sum_all([c.kv_cache_size_tokens for c in configs])
    if tokens is None:
        tokens = _sum_all(
            [
                c.num_gpu_blocks * c.block_size_tokens
                if c.num_gpu_blocks is not None and c.block_size_tokens is not None
                else None
                for c in configs
            ]
        )
    labelled = any(engine for engine in usage)
    return KvCacheState(
        usage_ratio=ratio,
        usage_ratio_by_engine=tuple(sorted(usage.items())) if labelled else (),
        block_size_tokens=_first(c.block_size_tokens for c in configs),
        blocks_total=total,
        blocks_used=used,
        blocks_free=free,
        cache_dtype=_first(c.cache_dtype for c in configs) or cache_dtype,
        size_tokens=tokens,
        max_concurrency=_sum_all([c.max_concurrency for c in configs]),
        gpu_memory_utilization=_first(c.gpu_memory_utilization for c in configs),
    )


def replica_started_at_s(reading: Reading) -> float | None:
    """Return when the replica's earliest process started (Unix time), None when not exposed."""
    series = reading.gauges.get("process_start") or {}
    starts = [value for value in series.values() if math.isfinite(value) and value > 0]
    return min(starts) if starts else None


def uptime_s(started_at_s: float | None, now_s: float) -> float | None:
    """Return seconds since the replica started, None when unknown or the clocks disagree."""
    if started_at_s is None or now_s < started_at_s:
        return None
    return now_s - started_at_s


SGLANG_NOTES = (
    "SGLang counts prompt and generation tokens when a request finishes: a token rate over a "
    "window credits a long request at its end",
)
"""What a reader of an SGLang snapshot should know of its numbers (names_sglang.py says more)."""


@dataclass(frozen=True, slots=True)
class ShownGpu:
    """The GPUs to show and judge, and whether they are the simulated replica's, not real ones."""

    gpu: GpuSnapshot
    simulated: bool


def shown_gpu(nvml: GpuSnapshot | None, snapshot: Snapshot | None) -> ShownGpu | None:
    """NVML's reading when it sees a GPU; else the simulated replica's, marked; else NVML's reason.

    A real reading always wins: the simulated GPUs are shown only where NVML reads none.
    """
    if nvml is not None and nvml.visible and nvml.devices:
        return ShownGpu(nvml, simulated=False)
    simulated = snapshot.simulated_gpu if snapshot is not None else None
    if simulated is not None:
        return ShownGpu(simulated, simulated=True)
    return ShownGpu(nvml, simulated=False) if nvml is not None else None


def build_snapshot(
    *,
    taken_at_s: float,
    reading: Reading,
    view: WindowView,
    short_view: WindowView | None = None,
    replica: ReplicaInfo | None = None,
    ttft_percentile: float | None = None,
    itl_percentile: float | None = None,
    notes: tuple[str, ...] = (),
) -> Snapshot:
    """Build a Snapshot from the newest reading and the long (and short) window views."""
    info = replica or ReplicaInfo()
    model = info.model_name or (reading.model_names[0] if reading.model_names else None)
    info = ReplicaInfo(
        url=info.url,
        model_name=model,
        served_models=info.served_models,
        version=info.version,
        healthy=info.healthy,
        health_detail=info.health_detail,
        engine_generation=(
            None if reading.engine != "vllm" else "v0" if reading.v0_engine else "v1"
        ),
        engines=len(reading.engines) or 1,
        started_at_s=replica_started_at_s(reading),
        engine=reading.engine,
        kv_cache_dtype=info.kv_cache_dtype,
        model_dtype=info.model_dtype,
        kv_tokens_cap=info.kv_tokens_cap,
    )
    return Snapshot(
        taken_at_s=taken_at_s,
        replica=info,
        requests=request_counts(reading),
        kv=kv_cache_state(reading, info.kv_cache_dtype),
        window=server_window_stats(view, reading, ttft_percentile, itl_percentile),
        short_window=(
            server_window_stats(short_view, reading, ttft_percentile, itl_percentile)
            if short_view is not None
            else None
        ),
        missing=reading.missing,
        unknown=reading.unknown,
        notes=notes + (SGLANG_NOTES if reading.engine == "sglang" else ()),
        simulated_gpu=simulated_gpu(reading, taken_at_s),
    )
