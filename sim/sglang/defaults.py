"""SGLang 0.5.23's defaults on a GPU, and the constants of its server the sim reproduces.

The rules follow `arg_groups/memory_hook.handle_gpu_memory_settings` (chunked prefill size, decode
CUDA-graph batch size and `mem_fraction_static` by device memory) and
`KVCacheConfigurator.resolve_max_num_reqs` (the running-request cap from the pool's size), for one
dense model without data-parallel attention, speculative decoding or disaggregation.
"""

from __future__ import annotations

from slotop.sim.types import GpuSpec

SGLANG_VERSION = "0.5.23"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 30000
PAGE_SIZE = 1
"""Tokens per KV page with SGLang's default attention backends on CUDA."""

MAX_PREFILL_TOKENS = 16384
DECODE_LOG_INTERVAL = 40
"""The scheduler publishes its gauges at every prefill batch and every this many decode batches."""

FORCE_STREAM_INTERVAL = 50
"""A non-streaming request's output goes to the tokenizer every this many tokens, and at its end
(SGLANG_FORCE_STREAM_INTERVAL); a streaming one's every token (`--stream-interval 1`)."""

INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO = INIT_NEW_TOKEN_RATIO * 0.14
NEW_TOKEN_RATIO_DECAY = (INIT_NEW_TOKEN_RATIO - MIN_NEW_TOKEN_RATIO) / 600
"""SGLang's admission estimate of the share of max_new_tokens still to come: 0.7 at start and
when idle, less this much per decode batch down to its floor (SGLANG_*_NEW_TOKEN_RATIO_*)."""

RETRACT_DECODE_STEPS = 20
"""Decode steps SGLang assumes a retracted request still needs (SGLANG_RETRACT_DECODE_STEPS)."""

_MIB = 1 << 20


def device_memory_mib(gpu: GpuSpec) -> int:
    """The device's memory in MiB, as SGLang's `get_device_memory_capacity` reports it."""
    return gpu.memory_bytes // _MIB


def gpu_memory_defaults(gpu: GpuSpec, tp_size: int) -> tuple[int, int]:
    """(chunked_prefill_size, decode CUDA-graph max batch size) that SGLang picks for this GPU."""
    mib = device_memory_mib(gpu)
    wide = tp_size >= 4
    if mib < 20 * 1024:
        return 2048, 8
    if mib < 35 * 1024:
        return 4096, 160 if wide else 48
    if mib < 60 * 1024:
        return 4096, 160 if wide else 32
    if mib < 160 * 1024:
        return 8192, 512 if wide else 256
    return 16384, 512


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """The token counts SGLang captures prefill CUDA graphs for, up to `max_tokens`."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_tokens + 1, 512),
    ]
    return [size for size in sizes if size <= max_tokens]


def default_mem_fraction_static(
    gpu: GpuSpec,
    *,
    tp_size: int,
    chunked_prefill_size: int,
    max_prefill_tokens: int,
    decode_graph_max_bs: int,
    max_total_tokens: int | None,
) -> float:
    """The share of GPU memory SGLang keeps for weights and KV cache when none is given.

    What it reserves besides, in MiB: 512 of constants, 1.5 per activation token (the chunked
    prefill size, at least 2,048), an eighth of a GiB per rank, 2 per decode-graph batch size, 8
    per captured prefill-graph size; at least 10 GiB on devices over 60 GiB. The share is rounded
    to three decimals.
    """
    mib = device_memory_mib(gpu)
    tokens = chunked_prefill_size if chunked_prefill_size > 0 else max_prefill_tokens
    reserved = 512 + max(tokens, 2048) * 1.5 + tp_size / 8 * 1024
    prefill_max = chunked_prefill_size
    if max_total_tokens is not None:
        prefill_max = min(prefill_max, max_total_tokens)
    reserved += decode_graph_max_bs * 2 + len(prefill_graph_sizes(prefill_max)) * 8
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mib - reserved) / mib, 3)


def max_running_requests(max_total_num_tokens: int, context_len: int, requested: int | None) -> int:
    """The running-request cap SGLang applies: the one asked for, or its estimate from the pool,
    and never more than half the pool's tokens."""
    if requested is not None:
        return max(1, min(requested, max_total_num_tokens // 2))
    estimated = max(min(int(max_total_num_tokens / context_len * 512), 4096), 2048)
    return max(1, min(estimated, max_total_num_tokens // 2))
