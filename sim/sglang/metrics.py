"""The simulated SGLang replica's /metrics: SGLang 0.5.23's families, valued from the engine model.

What SGLang's scheduler reports (`scheduler_stats`) and what its tokenizer manager observes of each
request (`tokenizer_stats`), laid out as its multiprocess registry lays them out, in its order,
with the HTTP families (`http_metrics`). Families SGLang has no use for on one dense model on one
GPU (speculative decoding, hybrid SWA and Mamba pools, data-parallel attention, routing keys,
disaggregation queues) show the constant values an idle server of this shape reports; start-up
times and graph memory are `startup`'s. The sim's own lag and GPU families stay outside the
`sglang:` namespace, as in the vLLM mode.
"""

from __future__ import annotations

import itertools
import math
import os
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from slotop.sim.gpu import GpuActivity, SimGpus
from slotop.sim.metrics import LagRecorder, RequestFacts
from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.exposition import Histogram, histogram_family, value_family
from slotop.sim.sglang.families import (
    DP_IMBALANCE_BUCKETS,
    DP_SYNC_WAIT_BUCKETS,
    FAMILIES,
    ROUTING_KEY_BOUNDS,
    SCHEDULER_STAGES,
)
from slotop.sim.sglang.http_metrics import SglangHttpMetrics
from slotop.sim.sglang.scheduler_stats import SchedulerStats
from slotop.sim.sglang.startup import graph_capture_s, graph_memory_gb, startup_times
from slotop.sim.sglang.tokenizer_stats import TokenizerStats
from slotop.sim.types import EngineStats, StepOutcome

_GB = float(1 << 30)

_CONSTANT_GAUGES: tuple[tuple[str, float], ...] = (
    ("sglang:num_grammar_queue_reqs", 0.0),
    ("sglang:swa_token_usage", 0.0),
    ("sglang:mamba_usage", 0.0),
    ("sglang:swa_available_tokens", 0.0),
    ("sglang:swa_evictable_tokens", 0.0),
    ("sglang:swa_used_tokens", 0.0),
    ("sglang:mamba_available_tokens", 0.0),
    ("sglang:mamba_evictable_tokens", 0.0),
    ("sglang:mamba_used_tokens", 0.0),
    ("sglang:spec_accept_length", 0.0),
    ("sglang:spec_accept_rate", 0.0),
    ("sglang:spec_cap_length", 0.0),
    ("sglang:spec_block_accept_length", 0.0),
    ("sglang:spec_num_steps", 0.0),
    ("sglang:spec_num_draft_tokens", 0.0),
    ("sglang:num_prefill_bootstrap_queue_reqs", 0.0),
    ("sglang:num_prefill_inflight_queue_reqs", 0.0),
    ("sglang:num_decode_prealloc_queue_reqs", 0.0),
    ("sglang:num_decode_transfer_queue_reqs", 0.0),
    ("sglang:num_decode_host_receive_queue_reqs", 0.0),
    ("sglang:num_decode_deferred_kv_release_reqs", 0.0),
    ("sglang:pending_prealloc_token_usage", 0.0),
    ("sglang:prealloc_full_token_usage", 0.0),
    ("sglang:prealloc_swa_token_usage", 0.0),
    ("sglang:utilization", 0.0),
    ("sglang:fwd_occupancy", math.nan),
    ("sglang:is_cuda_graph", 0.0),
    ("sglang:num_unique_running_routing_keys", 0.0),
)
"""Gauges every scheduler report sets to what one dense model on one GPU has: nothing to report
(SGLang leaves `utilization` at 0 and `is_cuda_graph` unset; `fwd_occupancy` is NaN without its
device timer)."""


class SglangMetrics(Collector):
    """A registry holding SGLang's families, updated from the engine's step outcomes."""

    def __init__(
        self,
        replica: SglangReplica,
        late_threshold_s: float,
        gpus: SimGpus | None = None,
        activity: GpuActivity | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.replica = replica
        self.registry = CollectorRegistry(auto_describe=False)
        self.http = SglangHttpMetrics()
        self.lag = LagRecorder(late_threshold_s)
        self.gpus = gpus
        self.scheduler = SchedulerStats(replica)
        self.tokenizer = TokenizerStats()
        self._activity = activity
        self._clock = clock
        self._started = clock()
        self.registry.register(self)
        self.registry.register(self.lag)
        if gpus is not None:
            self.registry.register(gpus)
        name = replica.served_model_name
        self._engine_labels = {"engine_type": "unified", "model_name": name}
        self._scheduler_labels = {
            **self._engine_labels,
            "moe_ep_rank": "0",
            "pp_rank": "0",
            "tp_rank": "0",
        }
        self._pid_labels = {**self._scheduler_labels, "pid": str(os.getpid())}

    @property
    def last_gen_throughput(self) -> float:
        """Decode tokens per second over the last decode report's window (`/get_server_info`)."""
        return self.scheduler.last_gen_throughput

    def record_stats(self, stats: EngineStats) -> None:
        """Note the engine's state; an engine fallen idle publishes idle gauges at once."""
        self.scheduler.now(stats)

    def record_aborted(self, count: int) -> None:
        """Count requests whose clients went away, as SGLang's abort does."""
        self.tokenizer.aborted += count

    def record_step(
        self,
        outcome: StepOutcome,
        facts: Mapping[str, RequestFacts],
        last_token_s: Mapping[str, float],
    ) -> None:
        """Update every family from one step (SGLang keeps its own token times, not the loop's)."""
        del last_token_s
        if self.gpus is not None:
            self.gpus.sync(outcome.end_s)
        self.scheduler.step(outcome, facts, self.tokenizer.decoded)
        self.tokenizer.step(outcome, facts)

    # --- exposition ----------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """Every family that has a series, in the order SGLang's page lists them."""
        builders = self._builders()
        for spec in FAMILIES:
            build = builders.get(spec.name)
            metric = build() if build is not None else self._gauge(spec.name)
            if metric is not None:
                if isinstance(metric, list):
                    yield from metric
                else:
                    yield metric

    def _gauge(self, name: str) -> Metric | None:
        """A scheduler gauge as last published (constants once anything was published)."""
        value = self.scheduler.gauges.get(name)
        if value is None and self.scheduler.gauges:
            value = dict(_CONSTANT_GAUGES).get(name)
        if value is None:
            return None
        labels = self._pid_labels if name in _PID_GAUGES else self._scheduler_labels
        return value_family(name, [(labels, value)])

    def _builders(self) -> dict[str, Callable[[], Metric | list[Metric] | None]]:
        scheduler = self._scheduler_labels
        engine = self._engine_labels
        replica = self.replica
        pool = replica.pool
        published = bool(self.scheduler.gauges)

        def constant(name: str, value: float) -> Callable[[], Metric | None]:
            return lambda: value_family(name, [(scheduler, value)])

        def by(
            name: str, label: str, values: Mapping[str, float], base: Mapping[str, str]
        ) -> Callable[[], Metric | None]:
            return lambda: value_family(name, (({**base, label: k}, v) for k, v in values.items()))

        def stream_counter(name: str) -> Callable[[], Metric | None]:
            return lambda: value_family(
                name,
                (
                    ({**engine, "is_streaming": key}, counts[name])
                    for key, counts in self.tokenizer.counts.items()
                    if name in counts
                ),
            )

        def stream_histogram(name: str) -> Callable[[], Metric | None]:
            return lambda: histogram_family(
                name,
                (
                    ({**engine, "is_streaming": key}, histogram)
                    for key, histogram in self.tokenizer.by_stream.get(name, {}).items()
                ),
            )

        def routing(name: str) -> Callable[[], Metric | None]:
            bounds = [*map(str, ROUTING_KEY_BOUNDS), "+Inf"]
            return lambda: (
                value_family(
                    name,
                    (
                        ({**scheduler, "gt": gt, "le": le}, 0.0)
                        for gt, le in itertools.pairwise(bounds)
                    ),
                )
                if published
                else None
            )

        def zero_histogram(name: str, bounds: tuple[float, ...]) -> Callable[[], Metric | None]:
            return lambda: histogram_family(name, [(scheduler, Histogram(bounds))])

        graph_gb = graph_memory_gb(replica)
        startup = startup_times(replica)
        idle_s, busy_s, up_s = self._scheduler_seconds()
        stages = dict.fromkeys(SCHEDULER_STAGES, 0.0)
        stages["idle"] = idle_s
        stages["run_batch"] = busy_s
        return {
            "sglang:max_total_num_tokens": constant(
                "sglang:max_total_num_tokens", replica.max_total_num_tokens
            ),
            "sglang:weight_memory_usage_gb": constant(
                "sglang:weight_memory_usage_gb", pool.weights_bytes / _GB
            ),
            "sglang:kv_cache_memory_usage_gb": constant(
                "sglang:kv_cache_memory_usage_gb",
                replica.max_total_num_tokens * pool.bytes_per_token / _GB,
            ),
            "sglang:graph_memory_usage_gb": by(
                "sglang:graph_memory_usage_gb", "phase", graph_gb, scheduler
            ),
            "sglang:page_size": constant("sglang:page_size", replica.page_size),
            "sglang:num_pages": constant(
                "sglang:num_pages", replica.max_total_num_tokens // replica.page_size
            ),
            "sglang:context_len": constant("sglang:context_len", replica.context_len),
            "sglang:startup_available_gpu_memory_gb": constant(
                "sglang:startup_available_gpu_memory_gb", pool.activation_peak_bytes / _GB
            ),
            "sglang:routing_key_running_req_count": routing("sglang:routing_key_running_req_count"),
            "sglang:routing_key_all_req_count": routing("sglang:routing_key_all_req_count"),
            "sglang:dp_attention_token_imbalance_ratio": zero_histogram(
                "sglang:dp_attention_token_imbalance_ratio", DP_IMBALANCE_BUCKETS
            ),
            "sglang:dp_attention_sync_wait_seconds": zero_histogram(
                "sglang:dp_attention_sync_wait_seconds", DP_SYNC_WAIT_BUCKETS
            ),
            "sglang:per_stage_req_latency_seconds": lambda: histogram_family(
                "sglang:per_stage_req_latency_seconds",
                (({**scheduler, "stage": s}, h) for s, h in self.scheduler.stages.items()),
            ),
            "sglang:queue_time_seconds": lambda: (
                histogram_family(
                    "sglang:queue_time_seconds", [(scheduler, self.scheduler.queue_time)]
                )
                if self.scheduler.queue_time.count
                else None
            ),
            "sglang:process_cpu_seconds": by(
                "sglang:process_cpu_seconds",
                "component",
                {"tokenizer": 0.0, "detokenizer": 0.0},
                {},
            ),
            "sglang:http_requests": lambda: list(self.http.counters()) or None,
            "sglang:http_responses": lambda: None,
            "sglang:prompt_tokens": stream_counter("sglang:prompt_tokens"),
            "sglang:generation_tokens": stream_counter("sglang:generation_tokens"),
            "sglang:num_requests": stream_counter("sglang:num_requests"),
            "sglang:startup_time_seconds": by(
                "sglang:startup_time_seconds", "phase", startup, engine
            ),
            "sglang:startup_cuda_graph_time_seconds": by(
                "sglang:startup_cuda_graph_time_seconds",
                "phase",
                graph_capture_s(replica),
                engine,
            ),
            "sglang:prefill_effective_tokens": by(
                "sglang:prefill_effective_tokens", "mode", self.scheduler.effective, scheduler
            ),
            "sglang:scheduler_idle_seconds": constant("sglang:scheduler_idle_seconds", idle_s),
            "sglang:scheduler_process_cpu_seconds": constant(
                "sglang:scheduler_process_cpu_seconds", up_s
            ),
            "sglang:scheduler_stage_seconds": lambda: value_family(
                "sglang:scheduler_stage_seconds",
                (
                    ({**scheduler, "category": c, "forward_overlap": "none"}, v)
                    for c, v in stages.items()
                ),
            ),
            "sglang:dp_attention_tokens": by(
                "sglang:dp_attention_tokens",
                "kind",
                {"scheduled": 0.0, "imbalance": 0.0},
                scheduler,
            ),
            "sglang:dp_attention_steps": by(
                "sglang:dp_attention_steps", "rank_state", {"active": 0.0, "idle": 0.0}, scheduler
            ),
            "sglang:dp_attention_pairs": by(
                "sglang:dp_attention_pairs",
                "kind",
                {"scheduled": 0.0, "imbalance": 0.0},
                scheduler,
            ),
            "sglang:cuda_graph_passes": by(
                "sglang:cuda_graph_passes", "mode", self.scheduler.graph_passes, scheduler
            ),
            "sglang:realtime_tokens": by(
                "sglang:realtime_tokens", "mode", self.scheduler.realtime, scheduler
            ),
            "sglang:num_retracted_requests": self._retraction("sglang:num_retracted_requests"),
            "sglang:num_retracted_input_tokens": self._retraction(
                "sglang:num_retracted_input_tokens"
            ),
            "sglang:num_retracted_output_tokens": self._retraction(
                "sglang:num_retracted_output_tokens"
            ),
            "sglang:time_to_first_token_seconds": stream_histogram(
                "sglang:time_to_first_token_seconds"
            ),
            "sglang:e2e_request_latency_seconds": stream_histogram(
                "sglang:e2e_request_latency_seconds"
            ),
            "sglang:request_time_per_output_token_seconds": stream_histogram(
                "sglang:request_time_per_output_token_seconds"
            ),
            "sglang:prompt_tokens_histogram": self._token_histogram(
                "sglang:prompt_tokens_histogram", self.tokenizer.prompt_tokens
            ),
            "sglang:uncached_prompt_tokens_histogram": self._token_histogram(
                "sglang:uncached_prompt_tokens_histogram", self.tokenizer.uncached_prompt_tokens
            ),
            "sglang:generation_tokens_histogram": self._token_histogram(
                "sglang:generation_tokens_histogram", self.tokenizer.generation_tokens
            ),
            "sglang:inter_token_latency_seconds": self._token_histogram(
                "sglang:inter_token_latency_seconds", self.tokenizer.inter_token_latency
            ),
            "sglang:routing_keys_active": lambda: value_family(
                "sglang:routing_keys_active", [({}, 0.0)]
            ),
            "sglang:http_requests_active": lambda: list(self.http.gauges()) or None,
            "sglang:num_aborted_requests": lambda: (
                value_family("sglang:num_aborted_requests", [(engine, self.tokenizer.aborted)])
                if self.tokenizer.aborted
                else None
            ),
            "sglang:cached_tokens": lambda: (
                value_family(
                    "sglang:cached_tokens",
                    [({**engine, "cache_source": "device"}, float(self.tokenizer.cached_tokens))],
                )
                if self.tokenizer.cached_tokens
                else None
            ),
        }

    def _retraction(self, name: str) -> Callable[[], Metric | None]:
        value = self.scheduler.retracted.get(name)
        labels = self._scheduler_labels
        return lambda: None if value is None else value_family(name, [(labels, value)])

    def _token_histogram(self, name: str, histogram: Histogram) -> Callable[[], Metric | None]:
        labels = self._engine_labels
        return lambda: histogram_family(name, [(labels, histogram)]) if histogram.count else None

    def _scheduler_seconds(self) -> tuple[float, float, float]:
        """(idle, busy, up) seconds of the scheduler since start: busy is the engine's steps."""
        up_s = max(0.0, self._clock() - self._started)
        busy_s = self._activity.busy_s_total if self._activity is not None else 0.0
        busy_s = min(busy_s, up_s)
        return up_s - busy_s, busy_s, up_s


_PID_GAUGES = frozenset({"sglang:num_retracted_reqs", "sglang:num_paused_reqs"})
"""Gauges SGLang registers without a multiprocess mode, so they carry the scheduler's pid."""
