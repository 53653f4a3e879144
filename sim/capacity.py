"""KV-cache sizing the way vLLM 0.32 does it at start-up, with the memory it profiles estimated.

vLLM (`gpu_worker.determine_available_memory`, `kv_cache_utils`) computes, per GPU:

    requested  = ceil(total_memory × gpu_memory_utilization)
    available  = requested − weights − activation peak − non-torch memory − CUDA-graph estimate
    num_blocks = available // (block_size × bytes_per_token)       (bytes over all layers)
    max_concurrency      = num_blocks / ceil(max_model_len / block_size)
    kv_cache_size_tokens = int(max_concurrency × max_model_len)

and refuses to start when `available` minus the null block cannot hold one max_model_len request.
With `num_gpu_blocks_override` set, vLLM takes `available = override × bytes per block` instead.
The sim cannot profile, so the three overheads are estimated (see each helper) and tested against
vLLM's published start-up log for Llama-3.1-8B on one H100 (weights 14.99 GiB, activation peak
1.19–1.24 GiB, non-torch 0.06–0.35 GiB, ~447k KV tokens at utilisation 0.9).

SGLang 0.5.23 sizes its pool differently (`sglang_kv_pool`): it measures the free memory before
loading the model, keeps `mem_fraction_static` of it for weights and KV cache, and gives the KV
pool what the loaded weights leave of that share, in whole pages, capped by `--max-total-tokens`.
"""

from __future__ import annotations

import math
from dataclasses import replace

from slotop.sim.errors import KvCapacityError, SimConfigError
from slotop.sim.types import (
    KV_CACHE_DTYPE_BYTES,
    SGLANG_KV_CACHE_DTYPE_BITS,
    EngineConfig,
    GpuSpec,
    KvCapacity,
    ModelSpec,
)

_GIB = 1 << 30
_WEIGHT_BYTES = 2
"""Weights are bf16 (vLLM's `--dtype auto` for these checkpoints)."""

_NON_TORCH_BYTES_TP1 = int(0.30 * _GIB)
"""CUDA context, cuBLAS workspaces: vLLM logs "non_torch_memory takes 0.06–0.35GiB" on one GPU."""

_NON_TORCH_BYTES_PER_EXTRA_RANK = int(0.25 * _GIB)
"""NCCL and custom all-reduce buffers grow the non-torch share when tensor parallel is on."""

_CUDA_GRAPH_BYTES = int(0.30 * _GIB)
"""vLLM ≥ 0.21 subtracts its CUDA-graph estimate; logs show "Estimated CUDA graph memory: 0.09–0.36 GiB"."""

_ACTIVATION_BUFFERS_PER_TOKEN = 6
"""Hidden-size buffers alive at the activation peak (residual, norm out, attention in/out, ...)."""


def kv_dtype_bytes(kv_cache_dtype: str) -> int:
    """Bytes per KV element for a `--kv-cache-dtype` value; SimConfigError if vLLM would refuse it."""
    try:
        return KV_CACHE_DTYPE_BYTES[kv_cache_dtype]
    except KeyError:
        choices = ", ".join(repr(name) for name in KV_CACHE_DTYPE_BYTES)
        raise SimConfigError(
            f"invalid kv_cache_dtype {kv_cache_dtype!r} (choose from {choices})"
        ) from None


def kv_heads_per_rank(model: ModelSpec, tensor_parallel_size: int) -> int:
    """KV heads each rank holds: split across ranks, replicated when there are fewer than ranks."""
    return max(1, model.num_kv_heads // tensor_parallel_size)


def kv_bytes_per_token(model: ModelSpec, tensor_parallel_size: int, dtype_bytes: int) -> int:
    """Per-GPU KV bytes of one token over all layers: 2 (K and V) × layers × kv_heads × head_dim × dtype."""
    heads = kv_heads_per_rank(model, tensor_parallel_size)
    return 2 * model.num_layers * heads * model.head_dim * dtype_bytes


def kv_token_bytes(config: EngineConfig) -> int:
    """Per-GPU KV bytes of one token for the engine's pool, however it was sized."""
    if config.kv_pool is not None:
        return config.kv_pool.bytes_per_token
    dtype_bytes = kv_dtype_bytes(config.kv_cache_dtype)
    return kv_bytes_per_token(config.model, config.tensor_parallel_size, dtype_bytes)


def weights_bytes(model: ModelSpec, tensor_parallel_size: int) -> int:
    """Per-GPU weight bytes: bf16 parameters split across ranks, plus the rotary cos/sin cache."""
    rope_cache = model.max_position_embeddings * model.head_dim * _WEIGHT_BYTES
    return model.num_params * _WEIGHT_BYTES // tensor_parallel_size + rope_cache


def activation_peak_bytes(
    model: ModelSpec, tensor_parallel_size: int, max_num_batched_tokens: int, max_num_seqs: int
) -> int:
    """Estimated torch peak of vLLM's profile run: the larger of the forward and the sampler pass.

    Forward at max_num_batched_tokens: gate/up output (2 × intermediate), the activated product
    (1 × intermediate) and a few hidden-size buffers, bf16, MLP split across ranks. The sampler
    pass holds fp32 logits and probabilities for max_num_seqs rows. For Llama-3.1-8B at 8192
    tokens this gives 1.03 GiB against the 1.19–1.24 GiB vLLM logs.
    """
    per_token = (
        3 * model.intermediate_size // tensor_parallel_size
        + _ACTIVATION_BUFFERS_PER_TOKEN * model.hidden_size
    ) * _WEIGHT_BYTES
    forward = max_num_batched_tokens * per_token
    sampler = max_num_seqs * model.vocab_size * 4 * 2
    return max(forward, sampler)


def non_torch_bytes(tensor_parallel_size: int) -> int:
    """Estimated memory outside PyTorch's allocator (CUDA context, NCCL) per GPU."""
    return _NON_TORCH_BYTES_TP1 + _NON_TORCH_BYTES_PER_EXTRA_RANK * (tensor_parallel_size - 1)


def fit_max_model_len(config: EngineConfig) -> int:
    """The longest max_model_len the KV cache can hold one request of, capped at the model's own.

    What vLLM does for `--max-model-len -1` (or `auto`): the usable blocks after the null block,
    times the block size; KvCapacityError when not even one block is left.
    """
    probe = kv_capacity(replace(config, max_model_len=1))
    usable_blocks = probe.available_kv_cache_bytes // probe.bytes_per_block - 1
    if usable_blocks < 1:
        raise KvCapacityError(
            "Cannot auto-fit max_model_len: not enough GPU memory available to serve even a "
            "single token. Try increasing --gpu-memory-utilization"
        )
    return min(config.model.max_position_embeddings, usable_blocks * config.block_size)


def kv_capacity(config: EngineConfig) -> KvCapacity:
    """Size the KV cache for `config`; KvCapacityError when vLLM would refuse to start.

    A pool sized elsewhere (`config.kv_pool`, SGLang's) is taken as it is.
    """
    if config.kv_pool is not None:
        return config.kv_pool
    model = config.model
    tp = config.tensor_parallel_size
    dtype_bytes = kv_dtype_bytes(config.kv_cache_dtype)
    per_token = kv_bytes_per_token(model, tp, dtype_bytes)
    per_block = per_token * config.block_size
    requested = math.ceil(config.gpu.memory_bytes * config.gpu_memory_utilization)
    weights = weights_bytes(model, tp)
    activations = (
        activation_peak_bytes(model, tp, config.max_num_batched_tokens, config.max_num_seqs)
        + _CUDA_GRAPH_BYTES
    )
    non_torch = non_torch_bytes(tp)
    available = requested - weights - activations - non_torch
    override = config.num_gpu_blocks_override
    if override is not None:
        if override < 2:
            raise SimConfigError(
                f"num_gpu_blocks_override must be at least 2 (one is the null block), got {override}"
            )
        available = override * per_block
    if weights > requested and override is None:
        raise KvCapacityError(
            f"{model.name} needs {weights / _GIB:.2f} GiB of weights per GPU at tensor parallel "
            f"size {tp}, more than the {requested / _GIB:.2f} GiB that gpu_memory_utilization "
            f"{config.gpu_memory_utilization} allows on {config.gpu.device_name}; raise "
            "--tensor-parallel-size or pick a larger GPU"
        )
    if available <= 0:
        raise KvCapacityError(
            "No available memory for the cache blocks: weights, activations and overheads take "
            f"{(weights + activations + non_torch) / _GIB:.2f} GiB of the {requested / _GIB:.2f} "
            "GiB requested; try increasing --gpu-memory-utilization"
        )
    blocks_per_request = -(-config.max_model_len // config.block_size)
    needed = blocks_per_request * per_block
    if needed > available - per_block:
        fits = (available - per_block) // per_block * config.block_size
        hint = (
            f"Based on the available memory, the estimated maximum model length is {fits}. "
            if fits > 0
            else ""
        )
        raise KvCapacityError(
            f"To serve at least one request with the model's max seq len "
            f"({config.max_model_len}), ({needed / _GIB:.2f} GiB KV cache is needed, which is "
            f"larger than the available KV cache memory ({available / _GIB:.2f} GiB). {hint}"
            "Try increasing --gpu-memory-utilization or decreasing --max-model-len"
        )
    num_blocks = available // per_block
    max_concurrency = num_blocks / blocks_per_request
    return KvCapacity(
        cache_dtype=config.kv_cache_dtype,
        dtype_bytes=dtype_bytes,
        block_size=config.block_size,
        bytes_per_token=per_token,
        bytes_per_block=per_block,
        requested_memory_bytes=requested,
        weights_bytes=weights,
        activation_peak_bytes=activations,
        non_torch_bytes=non_torch,
        available_kv_cache_bytes=available,
        num_gpu_blocks=num_blocks,
        kv_cache_size_tokens=int(max_concurrency * config.max_model_len),
        max_model_len=config.max_model_len,
        max_concurrency=max_concurrency,
    )


def sglang_kv_bytes_per_token(
    model: ModelSpec, tensor_parallel_size: int, kv_cache_dtype: str
) -> int:
    """Per-GPU bytes of one token in SGLang's KV pool: K and V of every layer, plus block scales.

    SimConfigError for a dtype SGLang 0.5.23 does not offer.
    """
    try:
        bits, scale_block = SGLANG_KV_CACHE_DTYPE_BITS[kv_cache_dtype]
    except KeyError:
        choices = ", ".join(repr(name) for name in SGLANG_KV_CACHE_DTYPE_BITS)
        raise SimConfigError(
            f"invalid kv_cache_dtype {kv_cache_dtype!r} (choose from {choices})"
        ) from None
    elements = (
        2 * model.num_layers * kv_heads_per_rank(model, tensor_parallel_size) * model.head_dim
    )
    scales = elements // scale_block if scale_block else 0
    return elements * bits // 8 + scales


def sglang_kv_pool(
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tensor_parallel_size: int,
    kv_cache_dtype: str,
    page_size: int,
    mem_fraction_static: float,
    max_total_tokens: int | None,
    context_len: int,
) -> KvCapacity:
    """SGLang 0.5.23's KV pool for this model on this GPU, per rank, as a KvCapacity.

    SGLang (`KVCacheConfigurator._profile_available_bytes`, `MHAPoolConfigurator`) measures the
    free memory before loading the model (`pre`), loads it, and gives the pool what is free then
    less the slack `pre × (1 − mem_fraction_static)`: with nothing else resident that is
    `pre × mem_fraction_static − weights`. The pool holds that many bytes' worth of tokens,
    floored to whole pages and capped by `--max-total-tokens`. The sim takes `pre` as the GPU's
    memory less the CUDA context (`non_torch_bytes`); SGLang also keeps one page back as its
    padded slot, counted here as the engine's reserved block. KvCapacityError when the weights
    leave nothing, with SGLang's advice.
    """
    per_token = sglang_kv_bytes_per_token(model, tensor_parallel_size, kv_cache_dtype)
    bits = SGLANG_KV_CACHE_DTYPE_BITS[kv_cache_dtype][0]
    non_torch = non_torch_bytes(tensor_parallel_size)
    pre_load = gpu.memory_bytes - non_torch
    static = int(pre_load * mem_fraction_static)
    weights = weights_bytes(model, tensor_parallel_size)
    available = static - weights
    if available <= 0:
        minimum = math.ceil(weights / pre_load * 1000) / 1000
        raise KvCapacityError(
            "Loaded weights leave no GPU memory for the KV cache under "
            f"--mem-fraction-static={mem_fraction_static}. Raise --mem-fraction-static above "
            f"{minimum:.3f} ({model.name} holds {weights / _GIB:.2f} GiB of weights per GPU at "
            f"tensor parallel size {tensor_parallel_size} on {gpu.device_name}), or raise "
            "--tp-size"
        )
    tokens = available // per_token // page_size * page_size
    if max_total_tokens is not None:
        tokens = min(tokens, max_total_tokens // page_size * page_size)
    if tokens < page_size:
        raise KvCapacityError(
            f"the KV pool would hold {tokens} tokens, less than one page of {page_size}; raise "
            "--mem-fraction-static or --max-total-tokens"
        )
    pages = tokens // page_size
    return KvCapacity(
        cache_dtype=kv_cache_dtype,
        dtype_bytes=max(1, bits // 8),
        block_size=page_size,
        bytes_per_token=per_token,
        bytes_per_block=per_token * page_size,
        requested_memory_bytes=static,
        weights_bytes=weights,
        activation_peak_bytes=pre_load - static,
        non_torch_bytes=non_torch,
        available_kv_cache_bytes=available,
        num_gpu_blocks=pages + 1,
        kv_cache_size_tokens=tokens,
        max_model_len=context_len,
        max_concurrency=tokens / context_len,
    )
