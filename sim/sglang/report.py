"""An SGLang replica's sizing in SGLang's words: its start-up log lines, and `--dry-run`'s report."""

from __future__ import annotations

from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.defaults import SGLANG_VERSION, gpu_memory_defaults
from slotop.sim.sglang.server_info import architecture

_GIB = float(1 << 30)

TORCH_KV_DTYPES: dict[str, str] = {
    "auto": "torch.bfloat16",
    "bf16": "torch.bfloat16",
    "bfloat16": "torch.bfloat16",
    "fp8_e5m2": "torch.float8_e5m2",
    "fp8_e4m3": "torch.float8_e4m3fn",
    "mxfp8": "torch.float8_e4m3fn",
    "nvfp4": "torch.float4_e2m1fn_x2",
    "fp4_mx_block16": "torch.float4_e2m1fn_x2",
}
"""How SGLang's log names the pool's element type for each `--kv-cache-dtype`."""


def start_up_lines(replica: SglangReplica) -> list[str]:
    """The lines SGLang logs as it loads the weights and sizes the KV pool, worded as it words them."""
    pool = replica.pool
    pre_load = replica.engine.gpu.memory_bytes - pool.non_torch_bytes
    kv_bytes = replica.max_total_num_tokens * pool.bytes_per_token
    return [
        f"Load weight end. elapsed={pool.weights_bytes / (2 * _GIB):.2f} s, "
        f"type={architecture(replica)[1]}, avail mem={(pre_load - pool.weights_bytes) / _GIB:.2f} "
        f"GB, mem usage={pool.weights_bytes / _GIB:.2f} GB.",
        f"KV Cache is allocated. dtype: {TORCH_KV_DTYPES[replica.args.kv_cache_dtype]}, "
        f"#tokens: {replica.max_total_num_tokens}, K size: {kv_bytes / 2 / _GIB:.2f} GB, "
        f"V size: {kv_bytes / 2 / _GIB:.2f} GB",
        f"max_total_num_tokens={replica.max_total_num_tokens}, "
        f"chunked_prefill_size={replica.chunked_prefill_size}, "
        f"max_prefill_tokens={replica.args.max_prefill_tokens}, "
        f"max_running_requests={replica.max_running_requests}, "
        f"context_len={replica.context_len}, "
        f"available_gpu_mem={pool.activation_peak_bytes / _GIB:.2f} GB",
    ]


def dry_run_text(replica: SglangReplica) -> str:
    """`--dry-run`'s lines: the setting, SGLang's start-up lines, what fits."""
    engine = replica.engine
    pool = replica.pool
    pre_load = engine.gpu.memory_bytes - pool.non_torch_bytes
    lines = [
        f"model {replica.args.model_path} on {replica.args.tp_size} x {engine.gpu.device_name} "
        f"(simulated SGLang {SGLANG_VERSION}; tp_size {replica.args.tp_size})",
        f"mem_fraction_static={replica.mem_fraction_static} of {pre_load / _GIB:.2f} GB free "
        f"before loading: {pool.requested_memory_bytes / _GIB:.2f} GB for weights and KV cache",
        *start_up_lines(replica),
        f"kv_cache_dtype={replica.args.kv_cache_dtype}: {pool.bytes_per_token:,} bytes per token "
        f"per GPU, page_size={replica.page_size}; requests of context_len "
        f"{replica.context_len:,} that fit at once: "
        f"{replica.max_total_num_tokens / replica.context_len:.2f}",
    ]
    return "\n".join(lines) + "\n"


def dry_run_report(replica: SglangReplica) -> dict[str, object]:
    """The sizing as a JSON-ready mapping with SGLang's names (what `--dry-run --json` prints)."""
    engine = replica.engine
    pool = replica.pool
    default_chunk, default_graph_bs = gpu_memory_defaults(engine.gpu, replica.args.tp_size)
    return {
        "engine": "sglang",
        "version": SGLANG_VERSION,
        "model_path": replica.args.model_path,
        "served_model_name": replica.served_model_name,
        "gpu": engine.gpu.name,
        "device_name": engine.gpu.device_name,
        "host_cpu": engine.host.name,
        "tp_size": replica.args.tp_size,
        "total_gpu_memory_bytes": engine.gpu.memory_bytes,
        "mem_fraction_static": replica.mem_fraction_static,
        "kv_cache_dtype": replica.args.kv_cache_dtype,
        "page_size": replica.page_size,
        "bytes_per_token": pool.bytes_per_token,
        "weights_bytes": pool.weights_bytes,
        "kv_cache_bytes": pool.kv_cache_size_tokens * pool.bytes_per_token,
        "max_total_num_tokens": replica.max_total_num_tokens,
        "num_pages": replica.max_total_num_tokens // replica.page_size,
        "context_len": replica.context_len,
        "chunked_prefill_size": replica.chunked_prefill_size,
        "max_prefill_tokens": replica.args.max_prefill_tokens,
        "max_running_requests": replica.max_running_requests,
        "cuda_graph_max_bs_decode": replica.decode_graph_max_bs,
        "sglang_default_chunked_prefill_size": default_chunk,
        "sglang_default_cuda_graph_max_bs_decode": default_graph_bs,
        "max_concurrency_at_context_len": replica.max_total_num_tokens / replica.context_len,
    }
