"""The simulated replica's /metrics: vLLM 0.32's families, plus its own lag and GPUs outside `vllm:`.

Names, types, help texts, label names (`model_name`, `engine`, and the extra per-family labels)
and histogram buckets follow vLLM 0.32's PrometheusStatLogger with default settings, so a
scraper cannot tell the sim from a real replica by the shape of what it reads. Values come from
the engine's step outcomes in simulated seconds, as vLLM's come from its engine timestamps.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from slotop.sim.gpu import SimGpus
from slotop.sim.http_metrics import HttpMetrics
from slotop.sim.types import (
    EngineConfig,
    EngineStats,
    FinishedRequest,
    KvCapacity,
    StepOutcome,
)

REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
TIME_TO_FIRST_TOKEN_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
ITERATION_TOKENS_BUCKETS: tuple[float, ...] = (
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
)  # fmt: skip
REQUEST_PARAMS_N_BUCKETS: tuple[float, ...] = (1, 2, 5, 10, 20)
REQUEST_NUM_PREEMPTIONS_BUCKETS: tuple[float, ...] = (1, 2, 3, 4, 5, 10, 20)

LAG_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
)  # fmt: skip
"""Bounds for the sim's own token lag histogram: sub-millisecond up to seconds behind."""

_FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
_PROMPT_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
_CACHE_HIT_SOURCES = ("device", "host", "p2p", "disk", "external_unspecified")
_ADMISSION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens")
_SLEEP_STATES = ("awake", "weights_offloaded", "discard_all")


def request_tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 series capped at max_model_len, for per-request token-count histograms."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_model_len:
                return tuple(buckets)
            buckets.append(value)
        exponent += 1


def cache_config_labels(config: EngineConfig, capacity: KvCapacity) -> dict[str, str]:
    """The `vllm:cache_config_info` labels: vLLM 0.32's CacheConfig fields, stringified as it does.

    `enable_prefix_caching` follows `--enable-prefix-caching` / `--no-enable-prefix-caching`.
    """
    block_size = str(config.block_size)
    return {
        "_block_size_resolved": "True",
        "block_size": block_size,
        "cache_dtype": config.kv_cache_dtype,
        "cache_hit_alignment_tokens": "None",
        "effective_attention_block_size": block_size,
        "enable_mamba_shared_prefix_checkpoint": "False",
        "enable_prefix_caching": str(config.enable_prefix_caching),
        "gpu_memory_utilization": str(config.gpu_memory_utilization),
        "hash_block_size": "None",
        "is_attention_free": "False",
        "kv_cache_dtype_skip_layers": "[]",
        "kv_cache_layout": "None",
        "kv_cache_max_concurrency": str(capacity.max_concurrency),
        "kv_cache_memory_bytes": "None",
        "kv_cache_size_tokens": str(capacity.kv_cache_size_tokens),
        "kv_offloading_backend": "native",
        "kv_offloading_size": "None",
        "kv_sharing_fast_prefill": "False",
        "mamba_block_size": "None",
        "mamba_cache_dtype": "auto",
        "mamba_cache_mode": "none",
        "mamba_page_size_padded": "None",
        "mamba_ssm_cache_dtype": "auto",
        "num_cpu_blocks": "None",
        "num_gpu_blocks": str(capacity.num_gpu_blocks),
        "num_gpu_blocks_override": "None",
        "prefix_cache_retention_interval": "0",
        "prefix_caching_hash_algo": "sha256",
        "prefix_match_unit": "None",
        "replayssm_buffer_len": "16",
        "skip_page_size_padded": "None",
        "sliding_window": "None",
        "swa_bounded_replay": "True",
        "use_kda_recoverssm": "False",
        "use_replayssm": "False",
        "user_specified_block_size": "False" if config.block_size == 16 else "True",
    }


@dataclass(frozen=True, slots=True)
class RequestFacts:
    """What the metrics need about a live request that the engine's outcome does not repeat.

    `stream` says whether its client asked for a stream (SGLang labels by it), `max_tokens` its
    output budget.
    """

    arrival_s: float
    prompt_tokens: int
    stream: bool = False
    max_tokens: int = 0


class LagRecorder(Collector):
    """Counts how late each token left versus its simulated schedule, cheaply enough per token."""

    def __init__(self, late_threshold_s: float) -> None:
        self.late_threshold_s = late_threshold_s
        self._counts = [0] * (len(LAG_BUCKETS) + 1)
        self._sum_s = 0.0
        self._late = 0
        self._resyncs = 0
        self.last_step_max_s = 0.0

    def observe(self, lag_s: float) -> None:
        """Record one token's distance from its schedule (seconds, early or late)."""
        if lag_s < 0.0:
            lag_s = -lag_s
        self._counts[bisect.bisect_left(LAG_BUCKETS, lag_s)] += 1
        self._sum_s += lag_s
        if lag_s > self.late_threshold_s:
            self._late += 1

    def count_resync(self) -> None:
        """Record that simulated time paused because the host fell too far behind."""
        self._resyncs += 1

    @property
    def resyncs(self) -> int:
        """Times simulated time paused so far."""
        return self._resyncs

    @property
    def tokens_late(self) -> int:
        """Tokens sent later than the threshold so far."""
        return self._late

    @property
    def tokens_total(self) -> int:
        """Tokens whose lag was recorded so far."""
        return sum(self._counts)

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        """Expose the lag families (outside the `vllm:` namespace)."""
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip(LAG_BUCKETS, self._counts, strict=False):
            cumulative += count
            buckets.append((repr(bound), cumulative))
        cumulative += self._counts[-1]
        buckets.append(("+Inf", cumulative))
        histogram = HistogramMetricFamily(
            "slotop_sim_token_lag_seconds",
            "How far from its simulated schedule (early or late) each streamed token left the "
            "simulated replica; large values mean the host is too slow and client-side "
            "latencies carry that error.",
        )
        histogram.add_metric([], buckets, self._sum_s)
        yield histogram
        yield GaugeMetricFamily(
            "slotop_sim_token_lag_max_seconds",
            "Worst token lag (distance from schedule) of the latest step that emitted tokens.",
            value=self.last_step_max_s,
        )
        yield CounterMetricFamily(
            "slotop_sim_late_tokens",
            f"Tokens sent more than {self.late_threshold_s * 1000:g} ms off their schedule.",
            value=self._late,
        )
        yield CounterMetricFamily(
            "slotop_sim_timeline_resyncs",
            "Times simulated time paused because the host fell too far behind the wall clock.",
            value=self._resyncs,
        )


class SimMetrics:
    """A private registry holding vLLM's metric families, updated from the engine's step outcomes."""

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        cache_config_labels: Mapping[str, str],
        late_threshold_s: float,
        gpus: SimGpus | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        GCCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        ProcessCollector(registry=self.registry)
        self.http = HttpMetrics(self.registry)
        self.lag = LagRecorder(late_threshold_s)
        self.registry.register(self.lag)
        self.gpus = gpus
        if gpus is not None:
            self.registry.register(gpus)
        self._labels = {"model_name": model_name, "engine": "0"}
        names = ["model_name", "engine"]
        values = (model_name, "0")
        reg = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, names, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, names, registry=reg).labels(*values)

        def histogram(name: str, doc: str, buckets: Iterable[float]) -> Histogram:
            return Histogram(name, doc, names, buckets=tuple(buckets), registry=reg).labels(*values)

        self.running = gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches."
        )
        self.waiting = gauge(
            "vllm:num_requests_waiting", "Number of requests waiting to be processed."
        )
        waiting_by_reason = Gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for "
            "scheduling capacity; 'deferred' = deferred by transient constraints (LoRA budget, "
            "KV transfer, blocked status). Sum of all reasons equals vllm:num_requests_waiting.",
            [*names, "reason"],
            registry=reg,
        )
        self.waiting_capacity = waiting_by_reason.labels(*values, "capacity")
        waiting_by_reason.labels(*values, "deferred").set(0)
        sleep_state = Gauge(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is "
            "awake; weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
            [*names, "sleep_state"],
            registry=reg,
        )
        for state in _SLEEP_STATES:
            sleep_state.labels(*values, state).set(1 if state == "awake" else 0)
        self.kv_usage = gauge(
            "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."
        )
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries",
            "Prefix cache queries, in terms of number of queried tokens.",
        )
        self.prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        counter(
            "vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache sharing, in "
            "terms of number of queried tokens.",
        )
        counter(
            "vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms "
            "of number of cached tokens.",
        )
        counter(
            "vllm:mm_cache_queries",
            "Multi-modal cache queries, in terms of number of queried items.",
        )
        counter("vllm:mm_cache_hits", "Multi-modal cache hits, in terms of number of cached items.")
        self.preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        )
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        by_source = Counter(
            "vllm:prompt_tokens_by_source",
            "Number of prompt tokens by source.",
            [*names, "source"],
            registry=reg,
        )
        self.prompt_tokens_computed = by_source.labels(*values, "local_compute")
        self.prompt_tokens_cache_hit = by_source.labels(*values, "local_cache_hit")
        for source in _PROMPT_SOURCES[2:]:
            by_source.labels(*values, source)
        self.prompt_tokens_cached = counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
        )
        cached_by_source = Counter(
            "vllm:prompt_tokens_cached_by_source",
            "Prefix-cache hit tokens by the cache tier that supplied them: device (local HBM), "
            "host (offloaded to DRAM), disk, p2p (transferred from another vLLM instance) or "
            "external_unspecified. Counted at admission; sums to vllm:prefix_cache_hits + "
            "vllm:external_prefix_cache_hits.",
            [*names, "source"],
            registry=reg,
        )
        self.cached_device = cached_by_source.labels(*values, "device")
        for source in _CACHE_HIT_SOURCES[1:]:
            cached_by_source.labels(*values, source)
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        )
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*names, "finished_reason"],
            registry=reg,
        )
        self.success = {reason: success.labels(*values, reason) for reason in _FINISHED_REASONS}
        rejections = Counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            ["model_name", "reason"],
            registry=reg,
        )
        for reason in _ADMISSION_REASONS:
            rejections.labels(model_name, reason)
        request_tokens = request_tokens_buckets(max_model_len)
        self.request_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", request_tokens
        )
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens",
            "Number of generation tokens processed.",
            request_tokens,
        )
        self.iteration_tokens = histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            ITERATION_TOKENS_BUCKETS,
        )
        histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            request_tokens,
        )
        histogram(
            "vllm:request_params_n",
            "Histogram of the n request parameter.",
            REQUEST_PARAMS_N_BUCKETS,
        )
        self.params_max_tokens = histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            request_tokens,
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds",
            "Histogram of time to first token in seconds.",
            TIME_TO_FIRST_TOKEN_BUCKETS,
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds",
            "Histogram of inter-token latency in seconds.",
            INTER_TOKEN_LATENCY_BUCKETS,
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            INTER_TOKEN_LATENCY_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue_time = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.inference_time = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.prefill_time = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.decode_time = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.request_preemptions = histogram(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            REQUEST_NUM_PREEMPTIONS_BUCKETS,
        )
        self.prefill_kv_computed = histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            request_tokens,
        )
        for name in ("flops", "read_bytes", "write_bytes"):
            what = {
                "flops": "floating point operations",
                "read_bytes": "bytes read from memory",
                "write_bytes": "bytes written to memory",
            }[name]
            counter(
                f"vllm:estimated_{name}_per_gpu_total",
                f"Estimated number of {what} per GPU (for Model Flops Utilization calculations).",
            )
        cache_info = Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            [*cache_config_labels.keys(), "engine"],
            registry=reg,
        )
        cache_info.labels(*cache_config_labels.values(), "0").set(1)
        self._prefix_queries_seen = 0
        self._prefix_hits_seen = 0
        self._prompt_cached_seen = 0

    def record_step(
        self,
        outcome: StepOutcome,
        facts: Mapping[str, RequestFacts],
        last_token_s: Mapping[str, float],
    ) -> None:
        """Update every family from one step; ``last_token_s`` holds each request's previous token time."""
        if self.gpus is not None:
            self.gpus.sync(outcome.end_s)
        stats = outcome.stats
        self.record_stats(stats)
        if stats.prefix_cache_queries_total > self._prefix_queries_seen:
            delta = stats.prefix_cache_queries_total - self._prefix_queries_seen
            self.prefix_queries.inc(delta)
            self._prefix_queries_seen = stats.prefix_cache_queries_total
        if stats.prefix_cache_hits_total > self._prefix_hits_seen:
            delta = stats.prefix_cache_hits_total - self._prefix_hits_seen
            self.prefix_hits.inc(delta)
            self.cached_device.inc(delta)
            self._prefix_hits_seen = stats.prefix_cache_hits_total
        if outcome.preempted_ids:
            self.preemptions.inc(len(outcome.preempted_ids))
        end_s = outcome.end_s
        prefilled = 0
        for request_id in outcome.first_token_ids:
            fact = facts.get(request_id)
            if fact is not None:
                prefilled += fact.prompt_tokens
                self.ttft.observe(end_s - fact.arrival_s)
        cached = stats.prompt_tokens_cached_total - self._prompt_cached_seen
        computed = prefilled
        if cached > 0:
            self._prompt_cached_seen = stats.prompt_tokens_cached_total
            self.prompt_tokens_cache_hit.inc(cached)
            self.prompt_tokens_cached.inc(cached)
            computed = max(0, prefilled - cached)
        if prefilled:
            self.prompt_tokens.inc(prefilled)
            self.prompt_tokens_computed.inc(computed)
        emitted = len(outcome.emitted_ids)
        if emitted:
            self.generation_tokens.inc(emitted)
            observe_itl = self.itl.observe
            for request_id in outcome.emitted_ids:
                previous_s = last_token_s.get(request_id)
                if previous_s is not None:
                    observe_itl(end_s - previous_s)
        if emitted or prefilled:
            self.iteration_tokens.observe(computed + emitted)
        for finished in outcome.finished:
            self.record_finished(finished)

    def record_stats(self, stats: EngineStats) -> None:
        """Set the scheduler gauges (also after an abort, when no step follows to do it).

        Waiting is what the engine's last scheduling pass left queued, not requests that arrived
        since: vLLM publishes its scheduler stats once per step, after a pass.
        """
        self.running.set(stats.num_running)
        self.waiting.set(stats.num_waiting)
        self.waiting_capacity.set(stats.num_waiting)
        self.kv_usage.set(stats.kv_usage_ratio)

    def record_aborted(self, count: int) -> None:
        """Nothing to count: vLLM counts no aborted request among its successes."""

    def record_finished(self, finished: FinishedRequest) -> None:
        """Count a finished request and observe its per-request histograms (aborts are not counted)."""
        if finished.finish_reason == "abort":
            return
        timing = finished.timing
        self.success[finished.finish_reason].inc()
        self.e2e.observe(timing.finished_s - timing.arrival_s)
        scheduled_s = (
            timing.first_scheduled_s if timing.first_scheduled_s is not None else timing.arrival_s
        )
        queued_s = timing.queued_s if timing.queued_s is not None else scheduled_s
        first_token_s = (
            timing.first_token_s if timing.first_token_s is not None else timing.finished_s
        )
        decode_s = timing.finished_s - first_token_s
        # vLLM's queue time runs from the scheduler taking the request in to admitting it.
        self.queue_time.observe(scheduled_s - queued_s)
        self.prefill_time.observe(first_token_s - scheduled_s)
        self.decode_time.observe(decode_s)
        self.inference_time.observe(timing.finished_s - scheduled_s)
        self.request_preemptions.observe(finished.num_preemptions)
        self.prefill_kv_computed.observe(finished.prompt_tokens - finished.cached_prompt_tokens)
        self.request_prompt_tokens.observe(finished.prompt_tokens)
        self.request_generation_tokens.observe(finished.output_tokens)
        generated_after_first = finished.output_tokens - 1
        self.tpot.observe(decode_s / generated_after_first if generated_after_first > 0 else 0.0)
        if finished.max_tokens:
            self.params_max_tokens.observe(finished.max_tokens)
