"""SGLang's metric names, as data, under the canonical keys vLLM's are read by (names.py).

From SGLang 0.5.23's collector (`sglang/srt/observability/metrics_collector.py`), served with
`--enable-metrics`. What the same key means on SGLang, where it differs from vLLM:

- The KV cache is counted in tokens: `token_usage` is the share of `max_total_num_tokens` that
  running requests hold (radix-cached tokens that could be evicted count as free), and the cache
  is cut into pages of `page_size` tokens (1 unless set), which stand where vLLM's blocks do.
- Retractions (a running request sent back to the queue when the cache runs out) stand where
  vLLM's preemptions do: `num_retracted_requests_total`.
- Prompt tokens, generation tokens, finished requests and cached prompt tokens are counted when a
  request finishes, not step by step: a rate over a window credits a long request at its end.
- The inter-token latency histogram observes a chunk of n new tokens as n observations of the
  chunk's interval over n: a quantile is of tokens, each given its chunk's mean gap.
- The server runs prometheus_client in multiprocess mode: a counter shows only once something has
  counted (so a replica that never retracted has no retraction counter), and there is no process
  start time.
- No counterparts of vLLM's prefill and decode time per request, tokens per engine step, waiting
  by reason, or `cache_config_info` (the cache's shape comes from its gauges, its dtype from
  `/get_server_info`).
"""

from __future__ import annotations

from slotop.collectors.names import CATALOGUE as VLLM_SPECS
from slotop.collectors.names import Catalogue, MetricSpec, _spec

PREFIX = "sglang:"

_SIM_GPU = tuple(spec for spec in VLLM_SPECS if spec.sim_only)

SPECS: tuple[MetricSpec, ...] = (
    # Scheduler state.
    _spec("requests_running", "gauge", "sglang:num_running_reqs"),
    _spec("requests_waiting", "gauge", "sglang:num_queue_reqs"),
    # KV cache, in tokens.
    _spec("kv_usage", "gauge", "sglang:token_usage"),
    _spec("kv_used_tokens", "gauge", "sglang:num_used_tokens"),
    _spec("kv_total_tokens", "gauge", "sglang:max_total_num_tokens"),
    _spec("kv_page_size", "gauge", "sglang:page_size", optional=True),
    _spec("kv_pages", "gauge", "sglang:num_pages", optional=True),
    _spec("context_len", "gauge", "sglang:context_len", optional=True),
    # Prefix cache: cached prompt tokens over prompt tokens, both counted at a request's finish.
    _spec("prefix_cache_queries", "counter", "sglang:prompt_tokens"),
    _spec("prefix_cache_hits", "counter", "sglang:cached_tokens", zero_when_absent=True),
    _spec("prefix_cache_hit_rate", "gauge", "sglang:cache_hit_rate", used=False, optional=True),
    # Counters.
    _spec("preemptions", "counter", "sglang:num_retracted_requests", zero_when_absent=True),
    _spec("prompt_tokens", "counter", "sglang:prompt_tokens"),
    _spec("generation_tokens", "counter", "sglang:generation_tokens"),
    _spec("requests_finished", "counter", "sglang:num_requests"),
    _spec(
        "requests_aborted",
        "counter",
        "sglang:num_aborted_requests",
        optional=True,
        zero_when_absent=True,
    ),
    # Speculative decoding, where served: accepted drafts over proposed ones.
    _spec("spec_accept_rate", "gauge", "sglang:spec_accept_rate", optional=True),
    # Outside multiprocess mode only.
    _spec("process_start", "gauge", "process_start_time_seconds", optional=True),
    # Latency histograms.
    _spec("ttft", "histogram", "sglang:time_to_first_token_seconds"),
    _spec("itl", "histogram", "sglang:inter_token_latency_seconds"),
    _spec("e2e", "histogram", "sglang:e2e_request_latency_seconds"),
    _spec("queue", "histogram", "sglang:queue_time_seconds"),
    # The simulated replica's modelled GPUs, as in vLLM mode.
    *_SIM_GPU,
)

# SGLang's groups a snapshot does not read (so not reported as unknown): data-parallel attention,
# speculative decoding, hybrid SSM and sliding-window pools, routing keys, disaggregation queues,
# start-up, HTTP, hierarchical cache, encoders, grammar, LoRA, scheduler accounting, and the
# gauges a snapshot reads elsewhere or not at all.
KNOWN_PREFIXES: tuple[str, ...] = tuple(
    PREFIX + group
    for group in (
        "backup",
        "cache_hit_rate",
        "cuda_graph_",
        "decode_",
        "dp_",
        "encoder_",
        "eplb_",
        "estimated_",
        "evicted_",
        "eviction_",
        "forward_",
        "full_token_usage",
        "fwd_",
        "gen_throughput",
        "generation_tokens_histogram",
        "get_loads_",
        "grammar_",
        "graph_",
        "hicache_",
        "http_",
        "is_cuda_graph",
        "kv_",
        "load_back_",
        "lora_",
        "mamba_",
        "max_running_requests_under_",
        "max_total_num_tokens_swa",
        "new_token_ratio",
        "num_bootstrap_",
        "num_decode_",
        "num_grammar_",
        "num_paused_",
        "num_prefill_",
        "num_retracted_",
        "num_so_",
        "num_streaming_",
        "num_transfer_",
        "num_unique_",
        "pending_prealloc_",
        "per_stage_",
        "prealloc_",
        "prefetch",
        "prefill_",
        "process_cpu_",
        "prompt_tokens_histogram",
        "realtime_tokens",
        "request_time_per_output_token",
        "routing_key",
        "scheduler_",
        "spec_",
        "startup_",
        "storage_",
        "streaming_",
        "swa_",
        "uncached_prompt_tokens_histogram",
        "utilization",
        "weight_",
    )
)

SGLANG = Catalogue(
    engine="sglang", label="SGLang", prefix=PREFIX, specs=SPECS, known_prefixes=KNOWN_PREFIXES
)
