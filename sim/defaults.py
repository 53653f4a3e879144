"""vLLM 0.32's defaults for the OpenAI server, and turning optional flag values into an EngineConfig."""

from __future__ import annotations

from dataclasses import replace

from slotop.sim.capacity import fit_max_model_len, kv_dtype_bytes
from slotop.sim.errors import SimConfigError
from slotop.sim.tables import host_by_name
from slotop.sim.types import EngineConfig, GpuSpec, HostSpec, ModelSpec, OutputLengths

_GIB = 1 << 30

BLOCK_SIZE = 16
GPU_MEMORY_UTILIZATION = 0.9
TENSOR_PARALLEL_SIZE = 1
SEED = 0
AUTO_MAX_MODEL_LEN = -1
"""`--max-model-len -1` (or `auto`): the longest length the KV cache can hold, as vLLM 0.32 fits it."""

CHAT_OUTPUT_LENGTHS = OutputLengths(kind="lognormal", median_tokens=150.0, sigma=0.9)
"""EOS as in chat traffic: a log-normal with median 150 tokens (mean ≈ 225), close to the
output lengths of ShareGPT conversations that `vllm bench serve` replays."""


def vllm_batch_defaults(gpu: GpuSpec, tensor_parallel_size: int) -> tuple[int, int]:
    """(max_num_seqs, max_num_batched_tokens) that `vllm serve` picks for this GPU.

    Mirrors `EngineArgs.get_batch_defaults` for the OpenAI API server: ≥ 160 GiB devices get
    1024 / 16384; ≥ 70 GiB devices other than A100 (H100, H200) get 1024 / 8192; the rest 256 / 2048.
    The choice depends on one device, not on the tensor-parallel size.
    """
    del tensor_parallel_size
    if gpu.memory_bytes >= 160 * _GIB:
        return 1024, 16384
    if gpu.memory_bytes >= 70 * _GIB and "a100" not in gpu.device_name.lower():
        return 1024, 8192
    return 256, 2048


def resolve_engine_config(
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    tensor_parallel_size: int = TENSOR_PARALLEL_SIZE,
    kv_cache_dtype: str = "auto",
    block_size: int = BLOCK_SIZE,
    max_num_seqs: int | None = None,
    max_num_batched_tokens: int | None = None,
    gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    max_model_len: int | None = None,
    seed: int = SEED,
    output_lengths: OutputLengths = CHAT_OUTPUT_LENGTHS,
    num_gpu_blocks_override: int | None = None,
    enable_prefix_caching: bool = True,
    async_scheduling: bool = True,
    host: HostSpec | None = None,
) -> EngineConfig:
    """Fill vLLM's defaults into the values left None and refuse what `vllm serve` refuses.

    `host` defaults to the machine the GPU usually sits in (`GpuSpec.host`).
    """
    kv_dtype_bytes(kv_cache_dtype)
    if tensor_parallel_size < 1:
        raise SimConfigError(
            f"--tensor-parallel-size must be at least 1, got {tensor_parallel_size}"
        )
    if model.num_attention_heads % tensor_parallel_size:
        raise SimConfigError(
            f"total number of attention heads ({model.num_attention_heads}) must be divisible "
            f"by tensor parallel size ({tensor_parallel_size})"
        )
    if block_size < 1:
        raise SimConfigError(f"--block-size must be positive, got {block_size}")
    if not 0.0 < gpu_memory_utilization <= 1.0:
        raise SimConfigError(
            f"--gpu-memory-utilization must be in (0, 1], got {gpu_memory_utilization}"
        )
    auto_fit = max_model_len == AUTO_MAX_MODEL_LEN
    if max_model_len is None or auto_fit:
        max_model_len = model.max_position_embeddings
    elif max_model_len < 1:
        raise SimConfigError(f"--max-model-len must be positive, got {max_model_len}")
    elif max_model_len > model.max_position_embeddings:
        raise SimConfigError(
            f"User-specified max_model_len ({max_model_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={model.max_position_embeddings} in "
            "model's config.json)"
        )
    default_seqs, default_tokens = vllm_batch_defaults(gpu, tensor_parallel_size)
    if max_num_seqs is None:
        max_num_seqs = default_seqs
    if max_num_batched_tokens is None:
        max_num_batched_tokens = default_tokens
    if max_num_seqs < 1:
        raise SimConfigError(f"--max-num-seqs must be positive, got {max_num_seqs}")
    if max_num_batched_tokens < max_num_seqs:
        raise SimConfigError(
            f"max_num_batched_tokens ({max_num_batched_tokens}) must be greater than or equal "
            f"to max_num_seqs ({max_num_seqs})."
        )
    if output_lengths.kind == "lognormal" and (
        output_lengths.median_tokens <= 0 or output_lengths.sigma < 0
    ):
        raise SimConfigError(
            "the output-length median must be positive and its sigma non-negative, got "
            f"median {output_lengths.median_tokens}, sigma {output_lengths.sigma}"
        )
    config = EngineConfig(
        model=model,
        gpu=gpu,
        host=host if host is not None else host_by_name(gpu.host),
        tensor_parallel_size=tensor_parallel_size,
        kv_cache_dtype=kv_cache_dtype,
        block_size=block_size,
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        seed=seed,
        output_lengths=output_lengths,
        num_gpu_blocks_override=num_gpu_blocks_override,
        enable_prefix_caching=enable_prefix_caching,
        async_scheduling=async_scheduling,
    )
    if auto_fit:
        config = replace(config, max_model_len=fit_max_model_len(config))
    return config
