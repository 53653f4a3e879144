"""vLLM's metric names across versions, as data: one canonical key, every name it went by.

SGLang's are in `names_sglang.py` under the same canonical keys; `Catalogue` holds one engine's,
and `engines.py` tells which engine a scrape came from.

Names are listed newest first. Counter names are written without `_total`, as the text parser
reports a counter family. `used` marks the metrics a snapshot reads; when one of those is absent
the snapshot reports it missing, unless it is `optional` (v0-only, or newer than 0.6) or another
metric `stands_in_for` it (v0's prefix-cache hit-rate gauge for v1's counters). The metrics not
used are listed so that they are not reported as unknown. Names that are not vLLM's own:
prometheus_client's `process_start_time_seconds`, the serving process's start, for the uptime; and
the simulated replica's `slotop_sim_gpu_*` gauges, its modelled GPUs (one series per `gpu`), which
a real replica never has.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

Kind = Literal["counter", "gauge", "histogram", "info"]

Engine = Literal["vllm", "sglang"]
"""The serving engine a replica runs: vLLM or SGLang."""

PREFIX = "vllm:"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One engine metric under all its names, newest first; `sim_only`: the simulated replica's own.

    `zero_when_absent`: a counter the engine shows only once something has counted (SGLang's
    multiprocess-mode counters: retractions, cached prompt tokens); while absent it reads as an
    empty series, zero since the start, rather than as a metric the replica lacks.
    """

    key: str
    kind: Kind
    names: tuple[str, ...]
    used: bool = True
    optional: bool = False
    v0_only: bool = False
    stands_in_for: tuple[str, ...] = ()
    sim_only: bool = False
    zero_when_absent: bool = False


def _spec(
    key: str, kind: Kind, *names: str, stands_in_for: tuple[str, ...] = (), **flags: bool
) -> MetricSpec:
    return MetricSpec(key, kind, tuple(names), stands_in_for=stands_in_for, **flags)


CATALOGUE: tuple[MetricSpec, ...] = (
    # Scheduler state.
    _spec("requests_running", "gauge", "vllm:num_requests_running"),
    _spec("requests_waiting", "gauge", "vllm:num_requests_waiting"),
    _spec(
        "requests_waiting_by_reason", "gauge", "vllm:num_requests_waiting_by_reason", optional=True
    ),
    _spec("requests_swapped", "gauge", "vllm:num_requests_swapped", optional=True, v0_only=True),
    # KV cache.
    _spec("kv_usage", "gauge", "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    _spec(
        "cpu_cache_usage",
        "gauge",
        "vllm:cpu_cache_usage_perc",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec("cache_config", "info", "vllm:cache_config_info"),
    _spec(
        "prefix_cache_queries",
        "counter",
        "vllm:prefix_cache_queries",
        "vllm:gpu_prefix_cache_queries",
    ),
    _spec("prefix_cache_hits", "counter", "vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits"),
    _spec(
        "prefix_cache_hit_rate",
        "gauge",
        "vllm:gpu_prefix_cache_hit_rate",
        optional=True,
        v0_only=True,
        stands_in_for=("prefix_cache_queries", "prefix_cache_hits"),
    ),
    _spec(
        "cpu_prefix_cache_hit_rate",
        "gauge",
        "vllm:cpu_prefix_cache_hit_rate",
        used=False,
        optional=True,
        v0_only=True,
    ),
    # Counters.
    _spec("preemptions", "counter", "vllm:num_preemptions"),
    _spec("prompt_tokens", "counter", "vllm:prompt_tokens"),
    _spec("generation_tokens", "counter", "vllm:generation_tokens"),
    _spec("requests_finished", "counter", "vllm:request_success"),
    # The process serving /metrics (prometheus_client's process collector); none in multiprocess mode.
    _spec("process_start", "gauge", "process_start_time_seconds", optional=True),
    # The simulated replica's modelled GPUs (slotop sim only; never NVML, never a real replica).
    _spec("sim_gpu_info", "gauge", "slotop_sim_gpu_info", optional=True, sim_only=True),
    _spec(
        "sim_gpu_utilization",
        "gauge",
        "slotop_sim_gpu_utilization_ratio",
        optional=True,
        sim_only=True,
    ),
    _spec(
        "sim_gpu_memory_used",
        "gauge",
        "slotop_sim_gpu_memory_used_bytes",
        optional=True,
        sim_only=True,
    ),
    _spec(
        "sim_gpu_memory_total",
        "gauge",
        "slotop_sim_gpu_memory_total_bytes",
        optional=True,
        sim_only=True,
    ),
    _spec("sim_gpu_power", "gauge", "slotop_sim_gpu_power_watts", optional=True, sim_only=True),
    _spec(
        "sim_gpu_power_limit",
        "gauge",
        "slotop_sim_gpu_power_limit_watts",
        optional=True,
        sim_only=True,
    ),
    # Latency histograms.
    _spec("ttft", "histogram", "vllm:time_to_first_token_seconds"),
    _spec(
        "itl", "histogram", "vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"
    ),
    _spec("e2e", "histogram", "vllm:e2e_request_latency_seconds"),
    _spec("queue", "histogram", "vllm:request_queue_time_seconds"),
    _spec("prefill", "histogram", "vllm:request_prefill_time_seconds"),
    _spec("decode", "histogram", "vllm:request_decode_time_seconds"),
    # Known, not read by a snapshot.
    _spec("inference", "histogram", "vllm:request_inference_time_seconds", used=False),
    _spec(
        "tpot_per_request",
        "histogram",
        "vllm:request_time_per_output_token_seconds",
        used=False,
        optional=True,
    ),
    _spec("request_prompt_tokens", "histogram", "vllm:request_prompt_tokens", used=False),
    _spec("request_generation_tokens", "histogram", "vllm:request_generation_tokens", used=False),
    # Tokens per engine step: the sweep reads its p99 to see the token budget bind.
    _spec("iteration_tokens", "histogram", "vllm:iteration_tokens_total", optional=True),
    _spec(
        "request_max_generation_tokens",
        "histogram",
        "vllm:request_max_num_generation_tokens",
        used=False,
        optional=True,
    ),
    _spec("request_params_n", "histogram", "vllm:request_params_n", used=False),
    _spec(
        "request_params_max_tokens",
        "histogram",
        "vllm:request_params_max_tokens",
        used=False,
        optional=True,
    ),
    _spec(
        "request_preemptions",
        "histogram",
        "vllm:request_num_preemptions",
        used=False,
        optional=True,
    ),
    _spec(
        "request_prefill_kv_computed_tokens",
        "histogram",
        "vllm:request_prefill_kv_computed_tokens",
        used=False,
        optional=True,
    ),
    _spec("engine_sleep_state", "gauge", "vllm:engine_sleep_state", used=False, optional=True),
    _spec(
        "prompt_tokens_by_source",
        "counter",
        "vllm:prompt_tokens_by_source",
        used=False,
        optional=True,
    ),
    _spec(
        "prompt_tokens_cached", "counter", "vllm:prompt_tokens_cached", used=False, optional=True
    ),
    _spec(
        "prompt_tokens_cached_by_source",
        "counter",
        "vllm:prompt_tokens_cached_by_source",
        used=False,
        optional=True,
    ),
    _spec(
        "external_prefix_cache_queries",
        "counter",
        "vllm:external_prefix_cache_queries",
        used=False,
        optional=True,
    ),
    _spec(
        "external_prefix_cache_hits",
        "counter",
        "vllm:external_prefix_cache_hits",
        used=False,
        optional=True,
    ),
    _spec("mm_cache_queries", "counter", "vllm:mm_cache_queries", used=False, optional=True),
    _spec("mm_cache_hits", "counter", "vllm:mm_cache_hits", used=False, optional=True),
    _spec(
        "admission_rejections", "counter", "vllm:admission_rejections", used=False, optional=True
    ),
    _spec("lora_requests_info", "gauge", "vllm:lora_requests_info", used=False, optional=True),
    _spec(
        "kv_block_lifetime",
        "histogram",
        "vllm:kv_block_lifetime_seconds",
        used=False,
        optional=True,
    ),
    _spec(
        "kv_block_idle_before_evict",
        "histogram",
        "vllm:kv_block_idle_before_evict_seconds",
        used=False,
        optional=True,
    ),
    _spec(
        "kv_block_reuse_gap",
        "histogram",
        "vllm:kv_block_reuse_gap_seconds",
        used=False,
        optional=True,
    ),
    _spec(
        "estimated_flops_per_gpu",
        "counter",
        "vllm:estimated_flops_per_gpu",
        used=False,
        optional=True,
    ),
    _spec(
        "estimated_read_bytes_per_gpu",
        "counter",
        "vllm:estimated_read_bytes_per_gpu",
        used=False,
        optional=True,
    ),
    _spec(
        "estimated_write_bytes_per_gpu",
        "counter",
        "vllm:estimated_write_bytes_per_gpu",
        used=False,
        optional=True,
    ),
    # v0-only throughput gauges (averages over the engine's own logging interval).
    _spec(
        "avg_prompt_throughput",
        "gauge",
        "vllm:avg_prompt_throughput_toks_per_s",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec(
        "avg_generation_throughput",
        "gauge",
        "vllm:avg_generation_throughput_toks_per_s",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec(
        "request_params_best_of",
        "histogram",
        "vllm:request_params_best_of",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec(
        "model_forward_time",
        "histogram",
        "vllm:model_forward_time_milliseconds",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec(
        "model_execute_time",
        "histogram",
        "vllm:model_execute_time_milliseconds",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec(
        "spec_decode_draft_acceptance_rate",
        "gauge",
        "vllm:spec_decode_draft_acceptance_rate",
        used=False,
        optional=True,
        v0_only=True,
    ),
    _spec(
        "spec_decode_efficiency",
        "gauge",
        "vllm:spec_decode_efficiency",
        used=False,
        optional=True,
        v0_only=True,
    ),
)

# Families whose names start with these are known groups (speculative decoding, KV connectors,
# LoRA, NIXL transfers...) that a snapshot does not read; they are not reported as unknown.
KNOWN_PREFIXES: tuple[str, ...] = (
    "vllm:spec_decode_",
    "vllm:kv_connector_",
    "vllm:kv_offload",
    "vllm:nixl_",
    "vllm:lora_",
    "vllm:ec_connector_",
    "vllm:mm_",
    "vllm:num_requests_kv_fetch_by_stage",
    "vllm:corrupted_requests",
    "vllm:watermark_requests",
    "vllm:estimated_",
)

# What a scrape keeps: vLLM's families and the catalogue's few names outside `vllm:`.
SCRAPED_PREFIXES: tuple[str, ...] = (
    PREFIX,
    *(name for spec in CATALOGUE for name in spec.names if not name.startswith(PREFIX)),
)

BY_KEY: Mapping[str, MetricSpec] = MappingProxyType({spec.key: spec for spec in CATALOGUE})
BY_NAME: Mapping[str, MetricSpec] = MappingProxyType(
    {name: spec for spec in CATALOGUE for name in spec.names}
)


READ_SAMPLES: frozenset[str] = frozenset(
    name + suffix for name in BY_NAME for suffix in ("", "_total", "_bucket", "_count", "_sum")
)
"""The sample names a scrape reads: the catalogue's families, each with its suffixes."""


def is_known(name: str) -> bool:
    """Say whether a family name is one the catalogue knows, by name or by known prefix."""
    return name in BY_NAME or name.startswith(KNOWN_PREFIXES)


@dataclass(frozen=True)
class Catalogue:
    """One engine's metrics under canonical keys: what a scrape keeps, reads and knows.

    `prefix` marks the engine's own families; `known_prefixes` are its groups a snapshot does not
    read, so that they are not reported as unknown.
    """

    engine: Engine
    label: str
    prefix: str
    specs: tuple[MetricSpec, ...]
    known_prefixes: tuple[str, ...]
    by_key: Mapping[str, MetricSpec] = field(init=False, repr=False)
    by_name: Mapping[str, MetricSpec] = field(init=False, repr=False)
    scraped_prefixes: tuple[str, ...] = field(init=False, repr=False)
    read_samples: frozenset[str] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        by_name = {name: spec for spec in self.specs for name in spec.names}
        set_ = object.__setattr__
        set_(self, "by_key", MappingProxyType({spec.key: spec for spec in self.specs}))
        set_(self, "by_name", MappingProxyType(by_name))
        outside = (name for name in by_name if not name.startswith(self.prefix))
        set_(self, "scraped_prefixes", (self.prefix, *outside))
        set_(
            self,
            "read_samples",
            frozenset(
                name + suffix
                for name in by_name
                for suffix in ("", "_total", "_bucket", "_count", "_sum")
            ),
        )

    def is_known(self, name: str) -> bool:
        """Say whether a family name is one this catalogue knows, by name or by known prefix."""
        return name in self.by_name or name.startswith(self.known_prefixes)


VLLM = Catalogue(
    engine="vllm", label="vLLM", prefix=PREFIX, specs=CATALOGUE, known_prefixes=KNOWN_PREFIXES
)
