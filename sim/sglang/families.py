"""SGLang 0.5.23's metric families as its server exposes them: names, types, help texts, buckets.

The names, types and help texts are the real server's (`tests/fixtures/metrics/FAMILIES-sglang.md`;
the retraction counters, which a capture shows only after a retraction, from its source). FAMILIES
is in the order the real `/metrics` lists them. Label sets: the scheduler's families carry
`engine_type`, `model_name`, `moe_ep_rank`, `pp_rank`, `tp_rank`; the tokenizer's `engine_type`
and `model_name`; the HTTP ones only their own. Buckets are SGLang's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class Family:
    """One family: its name as `# TYPE` names it less a counter's `_total`, its type, its help."""

    name: str
    kind: Literal["gauge", "counter", "histogram"]
    help: str


FAMILIES: tuple[Family, ...] = (
    Family(
        "sglang:max_total_num_tokens",
        "gauge",
        "Maximum total number of tokens in the KV cache pool.",
    ),
    Family("sglang:weight_memory_usage_gb", "gauge", "Memory used by model weights in GB."),
    Family("sglang:kv_cache_memory_usage_gb", "gauge", "Memory used by the KV cache pools in GB."),
    Family("sglang:graph_memory_usage_gb", "gauge", "Memory used by captured device graphs in GB."),
    Family("sglang:page_size", "gauge", "KV cache page size in tokens."),
    Family("sglang:num_pages", "gauge", "Number of KV cache pages."),
    Family("sglang:context_len", "gauge", "Maximum context length."),
    Family(
        "sglang:startup_available_gpu_memory_gb", "gauge", "Available GPU memory in GB at startup."
    ),
    Family("sglang:num_running_reqs", "gauge", "The number of running requests."),
    Family("sglang:num_queue_reqs", "gauge", "The number of requests in the waiting queue."),
    Family(
        "sglang:num_grammar_queue_reqs",
        "gauge",
        "The number of requests in the grammar waiting queue.",
    ),
    Family("sglang:gen_throughput", "gauge", "The generation throughput (token/s)."),
    Family("sglang:cache_hit_rate", "gauge", "The prefix cache hit rate."),
    Family("sglang:decode_sum_seq_lens", "gauge", "The sum of all sequence lengths in decode."),
    Family("sglang:token_usage", "gauge", "The token usage."),
    Family("sglang:full_token_usage", "gauge", "The token usage for full attention layers."),
    Family("sglang:swa_token_usage", "gauge", "The token usage for SWA layers."),
    Family("sglang:mamba_usage", "gauge", "The token usage for Mamba layers."),
    Family("sglang:num_used_tokens", "gauge", "The number of used tokens."),
    Family(
        "sglang:kv_available_tokens", "gauge", "Number of free token slots in the KV cache pool."
    ),
    Family(
        "sglang:kv_evictable_tokens",
        "gauge",
        "Number of evictable (radix-cached) token slots in the KV cache pool.",
    ),
    Family(
        "sglang:kv_used_tokens",
        "gauge",
        "Number of actively used token slots in the KV cache pool.",
    ),
    Family(
        "sglang:swa_available_tokens",
        "gauge",
        "Number of free token slots in the SWA pool (hybrid-SWA only).",
    ),
    Family(
        "sglang:swa_evictable_tokens",
        "gauge",
        "Number of evictable (radix-cached) token slots in the SWA pool.",
    ),
    Family(
        "sglang:swa_used_tokens", "gauge", "Number of actively used token slots in the SWA pool."
    ),
    Family(
        "sglang:mamba_available_tokens",
        "gauge",
        "Number of free state slots in the mamba SSM pool (hybrid-SSM only).",
    ),
    Family(
        "sglang:mamba_evictable_tokens",
        "gauge",
        "Number of evictable (radix-cached) state slots in the mamba SSM pool.",
    ),
    Family(
        "sglang:mamba_used_tokens",
        "gauge",
        "Number of actively used state slots in the mamba SSM pool.",
    ),
    Family(
        "sglang:spec_accept_length",
        "gauge",
        "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
    ),
    Family(
        "sglang:spec_accept_rate",
        "gauge",
        "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
    ),
    Family(
        "sglang:spec_cap_length",
        "gauge",
        "Mean DSpark confidence-scheduled verify window per verify step, incl the bonus slot (0 when no cap is scheduled).",
    ),
    Family(
        "sglang:spec_block_accept_length",
        "gauge",
        "Mean uncapped full-block accept length per verify step (accept + cap-trimmed drafts; exact only in DSpark cap-accept mode).",
    ),
    Family("sglang:spec_num_steps", "gauge", "Currently active speculative_num_steps."),
    Family(
        "sglang:spec_num_draft_tokens",
        "gauge",
        "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
    ),
    Family(
        "sglang:num_prefill_bootstrap_queue_reqs",
        "gauge",
        "The number of requests in the prefill bootstrap queue.",
    ),
    Family(
        "sglang:num_prefill_inflight_queue_reqs",
        "gauge",
        "The number of requests in the prefill inflight queue.",
    ),
    Family(
        "sglang:num_decode_prealloc_queue_reqs",
        "gauge",
        "The number of requests in the decode prealloc queue.",
    ),
    Family(
        "sglang:num_decode_transfer_queue_reqs",
        "gauge",
        "The number of requests in the decode transfer queue.",
    ),
    Family(
        "sglang:num_decode_host_receive_queue_reqs",
        "gauge",
        "Requests in the decode transfer queue receiving into host memory or waiting for device admission.",
    ),
    Family(
        "sglang:num_decode_deferred_kv_release_reqs",
        "gauge",
        "The number of failed decode requests whose KV allocations are held pending transfer drain acknowledgement or timeout.",
    ),
    Family(
        "sglang:pending_prealloc_token_usage",
        "gauge",
        "The token usage for pending preallocated tokens (not preallocated yet).",
    ),
    Family(
        "sglang:prealloc_full_token_usage",
        "gauge",
        "Share of the full-attention KV pool held by decode requests whose KV transfer is pending (preallocated, not yet running); same capacity basis as sglang:full_token_usage.",
    ),
    Family(
        "sglang:prealloc_swa_token_usage",
        "gauge",
        "Share of the SWA KV pool held by decode requests whose KV transfer is pending; same capacity basis as sglang:swa_token_usage.",
    ),
    Family("sglang:utilization", "gauge", "The utilization."),
    Family("sglang:fwd_occupancy", "gauge", "Forward pass GPU occupancy percentage."),
    Family("sglang:new_token_ratio", "gauge", "The new token ratio."),
    Family("sglang:is_cuda_graph", "gauge", "Whether the batch is using CUDA graph."),
    Family(
        "sglang:num_unique_running_routing_keys",
        "gauge",
        "Number of unique routing keys in running batch.",
    ),
    Family(
        "sglang:routing_key_running_req_count",
        "gauge",
        "Distribution of routing keys by running request count (gt < count <= le).",
    ),
    Family(
        "sglang:routing_key_all_req_count",
        "gauge",
        "Distribution of routing keys by running+waiting request count (gt < count <= le).",
    ),
    Family(
        "sglang:dp_attention_token_imbalance_ratio",
        "histogram",
        "Per MLP-sync step, max tokens over mean tokens across the DP ranks (1.0 = balanced, num_dp_ranks = one busy rank). Reported once per engine, by the scheduler of DP rank 0.",
    ),
    Family(
        "sglang:dp_attention_sync_wait_seconds",
        "histogram",
        "Wall time of this DP rank's scheduler MLP-sync all-gather per step. On the gloo path (the default with overlap scheduling) this is waiting for the slowest rank; on the device-group paths it also includes the gather's stream sync.",
    ),
    Family(
        "sglang:per_stage_req_latency_seconds",
        "histogram",
        "The latency of each stage of requests.",
    ),
    Family("sglang:queue_time_seconds", "histogram", "Histogram of queueing time in seconds."),
    Family("sglang:num_retracted_reqs", "gauge", "The number of retracted requests."),
    Family(
        "sglang:num_paused_reqs", "gauge", "The number of paused requests by async weight sync."
    ),
    Family(
        "sglang:process_cpu_seconds",
        "counter",
        "Total CPU time consumed by this process (user + system)",
    ),
    Family(
        "sglang:http_requests", "counter", "Total number of HTTP requests by endpoint and method"
    ),
    Family(
        "sglang:http_responses",
        "counter",
        "Total number of HTTP responses by endpoint and status code",
    ),
    Family("sglang:prompt_tokens", "counter", "Number of prefill tokens processed."),
    Family("sglang:generation_tokens", "counter", "Number of generation tokens processed."),
    Family("sglang:num_requests", "counter", "Number of requests processed."),
    Family("sglang:startup_time_seconds", "gauge", "Engine startup duration by phase in seconds."),
    Family(
        "sglang:startup_cuda_graph_time_seconds",
        "gauge",
        "CUDA graph capture duration by phase in seconds.",
    ),
    Family(
        "sglang:prefill_effective_tokens",
        "counter",
        "Effective prefill tokens with retracted-request re-counts excluded, updated on each log interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the numerator.",
    ),
    Family(
        "sglang:scheduler_idle_seconds",
        "counter",
        "Total wall time while the scheduler has no runnable or queued work.",
    ),
    Family(
        "sglang:scheduler_process_cpu_seconds",
        "counter",
        "Total CPU time consumed by the scheduler process across all threads.",
    ),
    Family(
        "sglang:scheduler_stage_seconds",
        "counter",
        "Total scheduler-loop wall time exclusively attributed to each stage. forward_overlap (full, partial, none): full=both endpoints active, partial=one, none=no observed overlap (including unavailable timing). Not exact overlapped/exposed seconds.",
    ),
    Family(
        "sglang:dp_attention_tokens",
        "counter",
        "Tokens of MLP-sync steps on this DP rank. kind=scheduled: tokens this rank ran; kind=imbalance: tokens the busiest rank ran beyond this rank, i.e. capacity lost to DP imbalance on this rank. On speculative-decode steps the unit is batch rows (requests).",
    ),
    Family(
        "sglang:dp_attention_steps",
        "counter",
        "MLP-sync steps on this DP rank. rank_state=idle: this rank had no tokens and only ran to keep the DP collectives in lockstep.",
    ),
    Family(
        "sglang:dp_attention_pairs",
        "counter",
        "Causal (query, key) pairs attended by MLP-sync steps on this DP rank, pricing every layer as full attention: a decode row reads its sequence, a prefill chunk its prefix plus the pairs within the chunk. kind=scheduled: this rank; kind=imbalance: the busiest rank's excess over this rank. The context-length counterpart of sglang:dp_attention_tokens_total; like it, speculative-decode steps count one query per row. Sliding-window layers execute fewer pairs than counted, so on hybrid-SWA models long rows are overstated.",
    ),
    Family(
        "sglang:cuda_graph_passes",
        "counter",
        "Total number of forward passes categorized by CUDA graph.",
    ),
    Family(
        "sglang:realtime_tokens",
        "counter",
        "Total number of tokens processed (updated on each log interval). mode: prefill_compute, prefill_cache, decode.",
    ),
    Family("sglang:num_retracted_requests", "counter", "Total number of retracted requests."),
    Family(
        "sglang:num_retracted_input_tokens", "counter", "Total number of retracted input tokens."
    ),
    Family(
        "sglang:num_retracted_output_tokens", "counter", "Total number of retracted output tokens."
    ),
    Family(
        "sglang:time_to_first_token_seconds",
        "histogram",
        "Histogram of time to first token in seconds.",
    ),
    Family(
        "sglang:e2e_request_latency_seconds",
        "histogram",
        "Histogram of End-to-end request latency in seconds",
    ),
    Family(
        "sglang:request_time_per_output_token_seconds",
        "histogram",
        "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
    ),
    Family("sglang:prompt_tokens_histogram", "histogram", "Histogram of prompt token length."),
    Family(
        "sglang:uncached_prompt_tokens_histogram",
        "histogram",
        "Histogram of uncached (compute) prompt token length.",
    ),
    Family(
        "sglang:generation_tokens_histogram", "histogram", "Histogram of generation token length."
    ),
    Family(
        "sglang:inter_token_latency_seconds",
        "histogram",
        "Histogram of inter-token latency in seconds.",
    ),
    Family(
        "sglang:routing_keys_active", "gauge", "Number of unique routing keys with active requests"
    ),
    Family("sglang:http_requests_active", "gauge", "Number of currently active HTTP requests"),
    Family("sglang:num_aborted_requests", "counter", "Number of requests aborted."),
    Family(
        "sglang:cached_tokens",
        "counter",
        "Number of cached prompt tokens by source (device/host/storage).",
    ),
)
"""Every family the simulated SGLang replica can expose, in the real server's order."""

BY_NAME: dict[str, Family] = {family.name: family for family in FAMILIES}

TOKENIZER_FAMILIES = frozenset(
    {
        "sglang:prompt_tokens",
        "sglang:generation_tokens",
        "sglang:num_requests",
        "sglang:cached_tokens",
        "sglang:num_aborted_requests",
        "sglang:startup_time_seconds",
        "sglang:startup_cuda_graph_time_seconds",
        "sglang:time_to_first_token_seconds",
        "sglang:e2e_request_latency_seconds",
        "sglang:request_time_per_output_token_seconds",
        "sglang:prompt_tokens_histogram",
        "sglang:uncached_prompt_tokens_histogram",
        "sglang:generation_tokens_histogram",
        "sglang:inter_token_latency_seconds",
    }
)
"""Families the tokenizer manager owns: labelled `engine_type` and `model_name` only."""

UNLABELLED_FAMILIES = frozenset(
    {
        "sglang:process_cpu_seconds",
        "sglang:http_requests",
        "sglang:http_responses",
        "sglang:http_requests_active",
        "sglang:routing_keys_active",
    }
)
"""Families with none of the engine labels (only their own, if any)."""

TIME_TO_FIRST_TOKEN_BUCKETS: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0,
)  # fmt: skip
E2E_REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (
    0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0,
    200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0,
)  # fmt: skip
INTER_TOKEN_LATENCY_BUCKETS: tuple[float, ...] = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
    0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000,
)  # fmt: skip
"""Also the request_time_per_output_token buckets."""

TOKEN_COUNT_BUCKETS: tuple[float, ...] = (
    100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10000,
    12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000, 60000, 80000,
    100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000,
)  # fmt: skip
"""The prompt, uncached-prompt and generation token histograms' buckets."""

QUEUE_TIME_BUCKETS: tuple[float, ...] = (
    0.0, 0.001, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0,
    30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0,
    800.0, 900.0, 1000.0, 1200.0, 1400.0, 1600.0, 1800.0, 2000.0, 2500.0, 3000.0,
)  # fmt: skip
PER_STAGE_LATENCY_BUCKETS: tuple[float, ...] = tuple(0.001 * 1.62**i for i in range(30))
"""SGLang's exponential buckets: from 1 ms, each 1.62 times the last, thirty of them."""

DP_SYNC_WAIT_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
DP_IMBALANCE_BUCKETS: tuple[float, ...] = (
    1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
)  # fmt: skip
ROUTING_KEY_BOUNDS: tuple[int, ...] = (0, 1, 2, 3, 5, 7, 10, 20, 50, 100, 200)
"""The routing-key gauge histograms' `gt` bounds; each series covers gt < count <= next."""

GRAPH_PHASES = (
    "prefill",
    "decode",
    "target_verify",
    "draft_prefill",
    "draft_decode",
    "draft_extend",
)
SCHEDULER_STAGES = (
    "other", "recv_requests", "process_input_requests", "get_next_batch_to_run", "process_queue",
    "run_batch", "process_batch_result", "sanity_check_cache", "idle",
)  # fmt: skip
PREFILL_EFFECTIVE_MODES = ("input", "device_hit", "host_hit", "storage_hit")
