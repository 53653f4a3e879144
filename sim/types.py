"""Frozen value types shared by the simulated replica's engine, CLI and server."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "abort"]
"""Why a request ended, spelled as vLLM's `finished_reason` metric label and OpenAI `finish_reason`."""

KV_CACHE_DTYPE_BYTES: dict[str, int] = {
    "auto": 2,
    "bfloat16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}
"""Bytes per KV element for each `--kv-cache-dtype` the sim accepts ("auto" follows the bf16 weights)."""

SGLANG_KV_CACHE_DTYPE_BITS: dict[str, tuple[int, int]] = {
    "auto": (16, 0),
    "fp8_e5m2": (8, 0),
    "fp8_e4m3": (8, 0),
    "mxfp8": (8, 32),
    "bf16": (16, 0),
    "bfloat16": (16, 0),
    "nvfp4": (4, 16),
    "fp4_mx_block16": (4, 16),
}
"""SGLang 0.5.23's `--kv-cache-dtype` choices, in its order: (bits per KV element, elements that
share one 1-byte scale, 0 for none). mxfp8 keeps an e8m0 scale per 32 elements; the FP4 recipes
pack two elements a byte and keep a scale per 16 ("auto" follows the bf16 weights)."""


@dataclass(frozen=True, slots=True)
class HostSpec:
    """The machine around the GPU: how fast its CPU does vLLM's host-side work, and how long a
    request's way to the engine takes besides that work.

    `cpu_scale` multiplies every CPU cost the sim prices: the engine core's time per step
    (`timing.CPU_STEP_S`, `timing.CPU_REQUEST_S`) and the API server's work per request and per
    token (`apiserver.API_SERVER_MEASURED_S`), both given for a datacenter host (1.0).
    `request_latency_s` is the part of a request's way from the socket to the engine core that
    is waiting rather than work (socket and process hand-offs, wake-ups), the same however busy
    the server is.
    """

    name: str
    description: str
    cpu_scale: float
    request_latency_s: float


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator from the hardware table: memory, bandwidth, dense tensor throughput, power.

    `tdp_w` is the board's power limit; `idle_power_w` what it draws in P0 with a model loaded and
    no kernel running (what a vLLM replica between requests draws). `host` names the machine it
    usually sits in (`tables.HOSTS`), which `--host-cpu` can override.
    """

    name: str
    device_name: str
    memory_bytes: int
    hbm_bandwidth_bytes_per_s: float
    bf16_dense_flops_per_s: float
    fp8_dense_flops_per_s: float | None
    interconnect_bytes_per_s: float
    tdp_w: float
    idle_power_w: float
    host: str


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """One dense decoder-only transformer: the shapes that set weight bytes, KV bytes and FLOPs."""

    name: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    num_params: int
    max_position_embeddings: int
    tie_word_embeddings: bool


@dataclass(frozen=True, slots=True)
class OutputLengths:
    """How many tokens a request generates before EOS when `ignore_eos` is false.

    `kind="lognormal"` draws exp(N(ln(median_tokens), sigma)), rounded, at least 1 (chat-like);
    `kind="never"` never emits EOS, so every request runs to `max_tokens` (a benchmark's view).
    """

    kind: Literal["lognormal", "never"]
    median_tokens: float
    sigma: float


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Everything the engine needs, fully resolved: no field means "pick a default".

    `num_gpu_blocks_override` is vLLM's flag of that name: when set, the KV cache holds exactly
    that many blocks whatever the memory arithmetic says (tests use it to make tiny caches).
    `enable_prefix_caching` is `--enable-prefix-caching`, on by default as in vLLM V1.
    `async_scheduling` is `--async-scheduling`: vLLM schedules the next step while this one runs
    (its default on GPUs; its CPU backend turns it off).
    `kv_pool` is a KV pool sized by another engine's rules (SGLang's, `capacity.sglang_kv_pool`),
    taken as it is; None sizes the pool as vLLM does.
    """

    model: ModelSpec
    gpu: GpuSpec
    host: HostSpec
    tensor_parallel_size: int
    kv_cache_dtype: str
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    gpu_memory_utilization: float
    max_model_len: int
    seed: int
    output_lengths: OutputLengths
    num_gpu_blocks_override: int | None = None
    enable_prefix_caching: bool = True
    async_scheduling: bool = True
    kv_pool: KvCapacity | None = None


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """The KV cache as the engine sizes it at start-up, per GPU (every tensor-parallel rank holds
    the same blocks): vLLM's blocks, or SGLang's pages (`capacity.sglang_kv_pool`).

    `num_gpu_blocks` counts one block the engine keeps back (vLLM's null block, SGLang's padded
    slot), so the pool holds `num_gpu_blocks − 1` usable blocks.
    """

    cache_dtype: str
    dtype_bytes: int
    block_size: int
    bytes_per_token: int
    bytes_per_block: int
    requested_memory_bytes: int
    weights_bytes: int
    activation_peak_bytes: int
    non_torch_bytes: int
    available_kv_cache_bytes: int
    num_gpu_blocks: int
    kv_cache_size_tokens: int
    max_model_len: int
    max_concurrency: float


@dataclass(frozen=True, slots=True)
class RequestTiming:
    """Simulated instants (seconds) of one request's life, enough for vLLM's latency histograms.

    `arrival_s` is when the request reached the engine core, `queued_s` when its scheduler first
    held it (vLLM's QUEUED event: the engine core takes requests in only between steps), and
    `first_scheduled_s` when a scheduling pass first admitted it (vLLM's SCHEDULED event).
    queue = first_scheduled − queued; prefill = first_token − first_scheduled;
    decode = finished − first_token; inference = finished − first_scheduled; e2e = finished − arrival.
    A request that never got that far has None there (e.g. aborted while waiting).
    """

    arrival_s: float
    queued_s: float | None
    first_scheduled_s: float | None
    first_token_s: float | None
    finished_s: float


@dataclass(frozen=True, slots=True)
class FinishedRequest:
    """A request that left the engine, why, and its token counts and timing.

    `cached_prompt_tokens` are the prompt tokens its first admission found in the prefix cache.
    """

    request_id: str
    finish_reason: FinishReason
    prompt_tokens: int
    output_tokens: int
    max_tokens: int
    num_preemptions: int
    timing: RequestTiming
    cached_prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class EngineStats:
    """The engine's gauges and running totals after a step (what vLLM's scheduler stats report).

    `kv_blocks_total` excludes vLLM's null block (num_gpu_blocks − 1), which is also what vLLM's
    `kv_cache_usage_perc` divides by; free blocks that still hold a cached prefix are not used.
    Prefix-cache queries and hits count each prompt's tokens and its cached tokens once, at its
    first admission (both stay 0 with prefix caching off, as in vLLM); `prompt_tokens_total` and
    `prompt_tokens_cached_total` count them when the request's first token comes out.
    `kv_blocks_cached_free` counts the free blocks that still hold a cached prefix (what SGLang
    calls evictable).
    """

    num_running: int
    num_waiting: int
    kv_blocks_used: int
    kv_blocks_total: int
    kv_usage_ratio: float
    preemptions_total: int
    prompt_tokens_total: int
    generation_tokens_total: int
    prefix_cache_queries_total: int
    prefix_cache_hits_total: int
    prompt_tokens_cached_total: int = 0
    kv_blocks_cached_free: int = 0


@dataclass(frozen=True, slots=True)
class FirstScheduled:
    """A request that a scheduling pass admitted for the first time: when it reached the engine
    core (`arrival_s`), when a pass took it in (`queued_s`) and when one admitted it."""

    request_id: str
    arrival_s: float
    queued_s: float
    scheduled_s: float


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """What one scheduler step did, spanning simulated time [start_s, end_s].

    `emitted_ids` lists every request that produced exactly one new token at end_s, in running
    order; `first_token_ids` is the subset whose token was their first. A request in `finished`
    also appears in `emitted_ids` (its last token) except when it ended without one.
    `gpu_s` is the part of the span the GPU spent in kernels (the rest it waited on the host).
    `stats` are the gauges as they stand at end_s; `scheduled_stats` as they stood once the step
    was scheduled, which is what vLLM publishes with async scheduling (its stats for a step go out
    after the next step has been scheduled).
    `first_scheduled` lists the requests the step's pass admitted for the first time;
    `decode_context_tokens` sums the sequence lengths of the step's decoding requests.
    """

    start_s: float
    end_s: float
    gpu_s: float
    emitted_ids: tuple[str, ...]
    first_token_ids: tuple[str, ...]
    finished: tuple[FinishedRequest, ...]
    preempted_ids: tuple[str, ...]
    prefill_tokens: int
    decode_tokens: int
    stats: EngineStats
    scheduled_stats: EngineStats
    first_scheduled: tuple[FirstScheduled, ...] = ()
    decode_context_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """How `slotop sim` asks the server to listen: `slotop.sim.server.serve(config, options) -> int`.

    The CLI resolves every value (defaults included) before the call; `serve` blocks until
    SIGINT/SIGTERM and returns the process exit code.
    """

    host: str
    port: int
    served_model_names: tuple[str, ...]
    api_key: str | None
    lag_log_threshold_s: float
    # The flags given that differ from their defaults, logged as vLLM logs them at start-up
    # (`non-default args: {...}`): the only place vLLM reports its batch limits.
    non_default_args: tuple[tuple[str, object], ...] = ()
