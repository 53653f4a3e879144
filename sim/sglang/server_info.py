"""The bodies of SGLang's `/get_server_info` and `/get_model_info` for a simulated replica.

`/get_server_info` lists the server arguments as SGLang resolved them (real SGLang lists all
five hundred or so; the sim lists the ones that matter to a tuner, in SGLang's order, with their
values on this GPU), then its launch command, status, the pool's `max_total_num_tokens`, the
longest input it takes, start-up times and, per scheduler, `internal_states` (the arguments again
with the running-request cap it applies, its last decode throughput and memory use).
"""

from __future__ import annotations

from typing import Any

from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.defaults import (
    DECODE_LOG_INTERVAL,
    SGLANG_VERSION,
    prefill_graph_sizes,
)
from slotop.sim.sglang.startup import graph_capture_s, graph_memory_gb, startup_times

_GB = float(1 << 30)


def _attention_backend(replica: SglangReplica) -> str:
    """The backend SGLang picks for a dense model: FlashAttention 3 on Hopper, else FlashInfer."""
    name = replica.engine.gpu.device_name.lower()
    return "fa3" if "h100" in name or "h200" in name else "flashinfer"


def server_args(replica: SglangReplica) -> dict[str, Any]:
    """The server arguments that matter to a tuner, resolved, in SGLang's order."""
    args = replica.args
    return {
        "model_path": args.model_path,
        "tokenizer_path": args.model_path,
        "tokenizer_mode": "auto",
        "skip_tokenizer_init": False,
        "load_format": "auto",
        "trust_remote_code": False,
        "context_length": args.context_length,
        "is_embedding": False,
        "revision": None,
        "dtype": "auto",
        "quantization": None,
        "kv_cache_dtype": args.kv_cache_dtype,
        "mem_fraction_static": replica.mem_fraction_static,
        "max_running_requests": args.max_running_requests,
        "max_queued_requests": None,
        "max_total_tokens": args.max_total_tokens,
        "chunked_prefill_size": replica.chunked_prefill_size,
        "enable_dynamic_chunking": False,
        "max_prefill_tokens": args.max_prefill_tokens,
        "schedule_policy": "fcfs",
        "enable_priority_scheduling": False,
        "retraction_policy": "length",
        "schedule_conservativeness": 1.0,
        "page_size": replica.page_size,
        "disable_radix_cache": args.disable_radix_cache,
        "disable_overlap_schedule": args.disable_overlap_schedule,
        "num_continuous_decode_steps": 1,
        "enable_mixed_chunk": False,
        "tp_size": args.tp_size,
        "pp_size": 1,
        "dp_size": 1,
        "enable_dp_attention": False,
        "device": "cuda",
        "random_seed": args.random_seed,
        "host": args.host,
        "port": args.port,
        "api_key": args.api_key,
        "served_model_name": replica.served_model_name,
        "stream_interval": 1,
        "enable_metrics": args.enable_metrics,
        "decode_log_interval": DECODE_LOG_INTERVAL,
        "attention_backend": _attention_backend(replica),
        "sampling_backend": "flashinfer",
        "disable_cuda_graph": False,
        "speculative_algorithm": None,
        "ep_size": 1,
        "enable_lora": None,
        "enable_hierarchical_cache": False,
        "disaggregation_mode": "null",
    }


def _memory_usage(replica: SglangReplica) -> dict[str, Any]:
    pool = replica.pool
    return {
        "weight": round(pool.weights_bytes / _GB, 3),
        "kvcache": round(replica.max_total_num_tokens * pool.bytes_per_token / _GB, 3),
        "startup_available": round(pool.activation_peak_bytes / _GB, 3),
        "token_capacity": replica.max_total_num_tokens,
        "token_capacity_swa": None,
        "graph": graph_memory_gb(replica),
    }


def server_info(replica: SglangReplica, last_gen_throughput: float) -> dict[str, Any]:
    """The `/get_server_info` body."""
    arguments = server_args(replica)
    times = startup_times(replica)
    cuda_graph = graph_capture_s(replica)
    scheduler_times = {
        "load_weight": times["load_weight"],
        "kv_cache_allocation": times["kv_cache_allocation"],
        "scheduler_e2e": times["scheduler_e2e"],
        "cuda_graph": cuda_graph,
    }
    longest = min(replica.context_len, replica.max_total_num_tokens) - 1
    decode_sizes = prefill_graph_sizes(replica.decode_graph_max_bs)
    return {
        **arguments,
        "launch_command": replica.args.launch_command,
        "status": "ready",
        "max_total_num_tokens": replica.max_total_num_tokens,
        "max_req_input_len": longest - 5,
        "startup_time": {**scheduler_times, "tokenizer_e2e": times["tokenizer_e2e"]},
        "kv_events": None,
        "internal_states": [
            {
                **arguments,
                "world_size": replica.args.tp_size,
                "startup_time": scheduler_times,
                "effective_max_running_requests_per_dp": replica.max_running_requests,
                "last_gen_throughput": last_gen_throughput,
                "memory_usage": _memory_usage(replica),
                "decode_cuda_graph_bs": decode_sizes,
                "decode_cuda_graph_memory_gb": round(replica.decode_graph_max_bs * 2 / 1024, 3),
            }
        ],
        "version": SGLANG_VERSION,
        "frontend": "python",
    }


def architecture(replica: SglangReplica) -> tuple[str, str]:
    """(model_type, architecture) of the served model's family, told by its name."""
    name = replica.engine.model.name.lower()
    if "qwen3" in name:
        return "qwen3", "Qwen3ForCausalLM"
    if "qwen" in name:
        return "qwen2", "Qwen2ForCausalLM"
    if "mistral" in name:
        return "mistral", "MistralForCausalLM"
    return "llama", "LlamaForCausalLM"


def _embedding(replica: SglangReplica) -> dict[str, Any]:
    """The embedding plan SGLang reports for a generation model: none, and its prefill graphs."""
    return {
        "family": "none",
        "task": "none",
        "execution": "none",
        "attention": "none",
        "pooling": "model_defined",
        "normalize": False,
        "postprocessor": "none",
        "tokenizer_special_tokens": "model_default",
        "supports_dimensions": False,
        "supports_token_embeddings": False,
        "supports_multimodal": False,
        "requires_embedding_flag": False,
        "auto_enable_embedding": False,
        "bcg_eligibility": "disabled",
        "safe_disable_kv_cache": False,
        "safe_disable_radix_cache": False,
        "safe_disable_chunked_prefill": False,
        "enabled": False,
        "matryoshka_dimensions": [],
        "bcg": {
            "prefill_backend": "disabled",
            "enabled": False,
            "capture_token_budget": replica.chunked_prefill_size,
            "capture_batch_sizes": prefill_graph_sizes(replica.chunked_prefill_size),
        },
        "cache": {
            "kv_cache_disabled": False,
            "radix_cache_disabled": replica.args.disable_radix_cache,
            "chunked_prefill_disabled": replica.chunked_prefill_size < 0,
        },
    }


def model_info(replica: SglangReplica) -> dict[str, Any]:
    """The `/get_model_info` body for a dense text model."""
    model_type, family_class = architecture(replica)
    return {
        "model_path": replica.args.model_path,
        "served_model_name": replica.served_model_name,
        "tokenizer_path": replica.args.model_path,
        "is_generation": True,
        "preferred_sampling_params": None,
        "weight_version": "default",
        "load_format": "auto",
        "reasoning_parser": None,
        "tool_call_parser": None,
        "disaggregation_mode": "null",
        "has_image_understanding": False,
        "has_audio_understanding": False,
        "model_type": model_type,
        "architectures": [family_class],
        "embedding": _embedding(replica),
    }
