"""An SGLang server's settings as its flags give them, resolved with its defaults for the GPU.

`resolve` turns what `sglang.launch_server` would be given (`SglangArgs`, None where SGLang picks)
into the settings it would run with (`SglangReplica`) and the engine model's `EngineConfig`:
`max_running_requests` is the engine's sequence cap, `chunked_prefill_size` its token budget per
step, `page_size` its block size, the KV pool is sized as SGLang sizes it
(`capacity.sglang_kv_pool`), radix caching is the engine's prefix caching and the overlap
scheduler its async scheduling.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop.sim.capacity import sglang_kv_pool
from slotop.sim.errors import SimConfigError
from slotop.sim.sglang.defaults import (
    MAX_PREFILL_TOKENS,
    default_mem_fraction_static,
    gpu_memory_defaults,
    max_running_requests,
)
from slotop.sim.tables import host_by_name
from slotop.sim.types import (
    SGLANG_KV_CACHE_DTYPE_BITS,
    EngineConfig,
    GpuSpec,
    HostSpec,
    KvCapacity,
    ModelSpec,
    OutputLengths,
)


@dataclass(frozen=True, slots=True)
class SglangArgs:
    """The server arguments the sim takes, as given; None leaves SGLang's default."""

    model_path: str
    served_model_name: str | None = None
    host: str = "127.0.0.1"
    port: int = 30000
    api_key: str | None = None
    tp_size: int = 1
    kv_cache_dtype: str = "auto"
    page_size: int | None = None
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int = MAX_PREFILL_TOKENS
    max_running_requests: int | None = None
    max_total_tokens: int | None = None
    mem_fraction_static: float | None = None
    context_length: int | None = None
    enable_metrics: bool = False
    disable_radix_cache: bool = False
    disable_overlap_schedule: bool = False
    random_seed: int = 0
    launch_command: str = ""


@dataclass(frozen=True, slots=True)
class SglangReplica:
    """The settings an SGLang server runs with, and the engine model that stands in for it.

    `page_size`, `chunked_prefill_size` and `mem_fraction_static` are resolved as SGLang resolves
    its arguments (what `/get_server_info` reports for them); `max_running_requests` is the cap
    the scheduler applies, `max_total_num_tokens` the KV pool's size, `context_len` the longest
    request.
    """

    args: SglangArgs
    served_model_name: str
    page_size: int
    chunked_prefill_size: int
    mem_fraction_static: float
    decode_graph_max_bs: int
    context_len: int
    max_total_num_tokens: int
    max_running_requests: int
    pool: KvCapacity
    engine: EngineConfig


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise SimConfigError(f"--{name.replace('_', '-')} must be positive, got {value}")


def resolve(
    args: SglangArgs,
    model: ModelSpec,
    gpu: GpuSpec,
    *,
    output_lengths: OutputLengths,
    host: HostSpec | None = None,
) -> SglangReplica:
    """Resolve the given arguments as SGLang does on this GPU; SimConfigError where it refuses."""
    if args.kv_cache_dtype not in SGLANG_KV_CACHE_DTYPE_BITS:
        raise SimConfigError(f"invalid --kv-cache-dtype {args.kv_cache_dtype!r}")
    for name in ("tp_size", "page_size", "max_running_requests", "max_total_tokens"):
        _positive(name, getattr(args, name))
    _positive("context_length", args.context_length)
    _positive("max_prefill_tokens", args.max_prefill_tokens)
    if model.num_attention_heads % args.tp_size:
        raise SimConfigError(
            f"the number of attention heads ({model.num_attention_heads}) must be divisible by "
            f"--tp-size ({args.tp_size})"
        )
    if args.mem_fraction_static is not None and not 0.0 < args.mem_fraction_static < 1.0:
        raise SimConfigError(
            f"--mem-fraction-static must be between 0 and 1, got {args.mem_fraction_static}"
        )
    if output_lengths.kind == "lognormal" and (
        output_lengths.median_tokens <= 0 or output_lengths.sigma < 0
    ):
        raise SimConfigError(
            "the output-length median must be positive and its sigma non-negative, got "
            f"median {output_lengths.median_tokens}, sigma {output_lengths.sigma}"
        )
    if args.chunked_prefill_size is not None and args.chunked_prefill_size == 0:
        raise SimConfigError("--chunked-prefill-size must be positive, or -1 to disable chunking")
    context_len = model.max_position_embeddings
    if args.context_length is not None:
        if args.context_length > context_len:
            raise SimConfigError(
                f"User-specified context_length ({args.context_length}) is greater than the "
                f"derived context_length ({context_len}). This may lead to incorrect model "
                "outputs or CUDA errors."
            )
        context_len = args.context_length
    chunk_default, graph_bs = gpu_memory_defaults(gpu, args.tp_size)
    chunk = args.chunked_prefill_size if args.chunked_prefill_size is not None else chunk_default
    if args.max_running_requests is not None:
        graph_bs = min(graph_bs, args.max_running_requests)
    fraction = args.mem_fraction_static
    if fraction is None:
        fraction = default_mem_fraction_static(
            gpu,
            tp_size=args.tp_size,
            chunked_prefill_size=chunk,
            max_prefill_tokens=args.max_prefill_tokens,
            decode_graph_max_bs=graph_bs,
            max_total_tokens=args.max_total_tokens,
        )
    page_size = args.page_size or 1
    pool = sglang_kv_pool(
        model,
        gpu,
        tensor_parallel_size=args.tp_size,
        kv_cache_dtype=args.kv_cache_dtype,
        page_size=page_size,
        mem_fraction_static=fraction,
        max_total_tokens=args.max_total_tokens,
        context_len=context_len,
    )
    tokens = pool.kv_cache_size_tokens
    running = max_running_requests(tokens, context_len, args.max_running_requests)
    # SGLang runs decode batches apart from prefill chunks, so its chunk size never holds a
    # decode back: the engine's budget is at least one token per running request.
    budget = chunk if chunk > 0 else max(args.max_prefill_tokens, context_len)
    engine = EngineConfig(
        model=model,
        gpu=gpu,
        host=host if host is not None else host_by_name(gpu.host),
        tensor_parallel_size=args.tp_size,
        kv_cache_dtype=args.kv_cache_dtype,
        block_size=page_size,
        max_num_seqs=running,
        max_num_batched_tokens=max(budget, running),
        gpu_memory_utilization=fraction,
        max_model_len=min(context_len, tokens),
        seed=args.random_seed,
        output_lengths=output_lengths,
        enable_prefix_caching=not args.disable_radix_cache,
        async_scheduling=not args.disable_overlap_schedule,
        kv_pool=pool,
    )
    return SglangReplica(
        args=args,
        served_model_name=args.served_model_name or args.model_path,
        page_size=page_size,
        chunked_prefill_size=chunk,
        mem_fraction_static=fraction,
        decode_graph_max_bs=graph_bs,
        context_len=context_len,
        max_total_num_tokens=tokens,
        max_running_requests=running,
        pool=pool,
        engine=engine,
    )
