"""Hardware and model tables, and loading a model's shapes from a Hugging Face config.json.

GPU figures are the vendors' datasheet numbers for dense (not 2:4 sparse) tensor throughput; the
memory is what `torch.cuda.mem_get_info` reports as total (what vLLM multiplies by
`--gpu-memory-utilization`), a little under the marketing size, as seen in vLLM start-up logs
("total_gpu_memory (79.19GiB)") and PyTorch out-of-memory messages ("a total capacity of ...").
Model shapes are copied from each model's published config.json; parameter counts are computed from
those shapes by `count_params` and agree with the published safetensors totals.

Power: `tdp_w` is the datasheet's maximum board power (the SXM parts' configurable ceiling).
`idle_power_w` is what nvidia-smi shows in P0 with memory held and no kernel running, which is how
a vLLM replica waits between requests; two such readings were found (cited at their entries), and
both are a fifth of TDP, so the other GPUs take `IDLE_SHARE_OF_TDP` of theirs, an estimate.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slotop.sim.errors import SimConfigError
from slotop.sim.types import GpuSpec, HostSpec, ModelSpec

_GIB = 1 << 30
_TB = 1e12

HOSTS: dict[str, HostSpec] = {
    host.name: host
    for host in (
        # Its request latency is fitted to InferenceBench's H100 first token at one stream; its
        # CPU (1.0) is the one the CPU costs are given for: see `timing` and `apiserver`.
        HostSpec(
            name="datacenter",
            description="a GPU server: tens of server cores, the engine core and the API server "
            "each on a core of their own",
            cpu_scale=1.0,
            request_latency_s=3.81e-3,
        ),
        # Fitted to the ai.wmx.dev L4 sweep on a g2-standard-4 VM: its CPU to the step times of
        # Qwen2.5-0.5B at 1 and 32 streams (which its CPU, not the L4, sets), its latency to the
        # first token at one stream.
        HostSpec(
            name="small-vm",
            description="a small cloud VM around one GPU: 4 vCPUs shared by the API server, the "
            "engine core and whatever else runs there (GCP g2-standard-4, AWS g6.xlarge)",
            cpu_scale=2.26,
            request_latency_s=12.3e-3,
        ),
    )
}
"""The host table, keyed by the names `--host-cpu` accepts; each GPU names its usual one."""

IDLE_SHARE_OF_TDP = 0.2
"""Idle draw in P0 as a share of TDP where no reading was found: H100 SXM 140/700, A100 85/400."""

GPUS: dict[str, GpuSpec] = {
    gpu.name: gpu
    for gpu in (
        # H100 SXM5 datasheet: 3.35 TB/s HBM3, 989 TFLOPS bf16 dense, 1,979 fp8, NVLink 900 GB/s.
        GpuSpec(
            name="h100-sxm",
            device_name="NVIDIA H100 80GB HBM3",
            memory_bytes=round(79.19 * _GIB),
            hbm_bandwidth_bytes_per_s=3.35 * _TB,
            bf16_dense_flops_per_s=989.4 * _TB,
            fp8_dense_flops_per_s=1978.9 * _TB,
            interconnect_bytes_per_s=450e9,
            tdp_w=700.0,  # datasheet: up to 700 W (configurable)
            # nvidia-smi in github.com/wilicc/gpu-burn/issues/114: two H100 80GB HBM3 in P0 with
            # 72,790 MiB held and 0-4 % utilisation drew 145 W and 140 W.
            idle_power_w=140.0,
            host="datacenter",
        ),
        # H100 PCIe datasheet: 2.0 TB/s HBM2e, 756 TFLOPS bf16 dense, 1,513 fp8, NVLink bridge 600 GB/s.
        GpuSpec(
            name="h100-pcie",
            device_name="NVIDIA H100 PCIe",
            memory_bytes=round(79.19 * _GIB),
            hbm_bandwidth_bytes_per_s=2.0 * _TB,
            bf16_dense_flops_per_s=756.0 * _TB,
            fp8_dense_flops_per_s=1513.0 * _TB,
            interconnect_bytes_per_s=300e9,
            tdp_w=350.0,  # datasheet: 300-350 W (configurable)
            idle_power_w=350.0 * IDLE_SHARE_OF_TDP,
            host="datacenter",
        ),
        # H200 SXM datasheet: 141 GB HBM3e at 4.8 TB/s, same tensor cores as H100 SXM.
        GpuSpec(
            name="h200",
            device_name="NVIDIA H200",
            memory_bytes=round(139.81 * _GIB),
            hbm_bandwidth_bytes_per_s=4.8 * _TB,
            bf16_dense_flops_per_s=989.4 * _TB,
            fp8_dense_flops_per_s=1978.9 * _TB,
            interconnect_bytes_per_s=450e9,
            tdp_w=700.0,  # datasheet: up to 700 W (configurable)
            idle_power_w=700.0 * IDLE_SHARE_OF_TDP,
            host="datacenter",
        ),
        # A100 SXM4 80 GB datasheet: 2,039 GB/s HBM2e, 312 TFLOPS bf16 dense, no fp8 tensor cores.
        GpuSpec(
            name="a100-80gb",
            device_name="NVIDIA A100-SXM4-80GB",
            memory_bytes=round(79.15 * _GIB),
            hbm_bandwidth_bytes_per_s=2.039 * _TB,
            bf16_dense_flops_per_s=312.0 * _TB,
            fp8_dense_flops_per_s=None,
            interconnect_bytes_per_s=300e9,
            tdp_w=400.0,  # datasheet: 400 W
            # nvidia-smi in github.com/NVIDIA/DCGM/issues/152: an A100-SXM4-80GB in P0 drew 85 W.
            idle_power_w=85.0,
            host="datacenter",
        ),
        # A100 SXM4 40 GB datasheet: 1,555 GB/s HBM2, 312 TFLOPS bf16 dense.
        GpuSpec(
            name="a100-40gb",
            device_name="NVIDIA A100-SXM4-40GB",
            memory_bytes=round(39.39 * _GIB),
            hbm_bandwidth_bytes_per_s=1.555 * _TB,
            bf16_dense_flops_per_s=312.0 * _TB,
            fp8_dense_flops_per_s=None,
            interconnect_bytes_per_s=300e9,
            tdp_w=400.0,  # datasheet: 400 W
            idle_power_w=400.0 * IDLE_SHARE_OF_TDP,
            host="datacenter",
        ),
        # L4 datasheet: 24 GB GDDR6 at 300 GB/s, 121 TFLOPS bf16 dense (242 sparse), 242 fp8.
        GpuSpec(
            name="l4",
            device_name="NVIDIA L4",
            memory_bytes=round(22.07 * _GIB),
            hbm_bandwidth_bytes_per_s=0.300 * _TB,
            bf16_dense_flops_per_s=121.0 * _TB,
            fp8_dense_flops_per_s=242.0 * _TB,
            interconnect_bytes_per_s=32e9,
            tdp_w=72.0,  # datasheet: 72 W
            idle_power_w=72.0 * IDLE_SHARE_OF_TDP,
            host="small-vm",
        ),
        # L40S datasheet: 48 GB GDDR6 at 864 GB/s, 362 TFLOPS bf16 dense (733 sparse), 733 fp8.
        GpuSpec(
            name="l40s",
            device_name="NVIDIA L40S",
            memory_bytes=round(44.52 * _GIB),
            hbm_bandwidth_bytes_per_s=0.864 * _TB,
            bf16_dense_flops_per_s=362.0 * _TB,
            fp8_dense_flops_per_s=733.0 * _TB,
            interconnect_bytes_per_s=32e9,
            tdp_w=350.0,  # datasheet: 350 W
            idle_power_w=350.0 * IDLE_SHARE_OF_TDP,
            host="datacenter",
        ),
    )
}
"""The hardware table, keyed by the names `--gpu` accepts."""


def _model(
    name: str,
    *,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int,
    intermediate_size: int,
    vocab_size: int,
    max_position_embeddings: int,
    tie_word_embeddings: bool = False,
    head_dim: int | None = None,
) -> ModelSpec:
    if head_dim is None:
        head_dim = hidden_size // num_attention_heads
    return ModelSpec(
        name=name,
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        num_params=count_params(
            num_layers=num_layers,
            hidden_size=hidden_size,
            num_attention_heads=num_attention_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            intermediate_size=intermediate_size,
            vocab_size=vocab_size,
            tie_word_embeddings=tie_word_embeddings,
            attention_bias=name.startswith("Qwen/Qwen2"),
        ),
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
    )


def count_params(
    *,
    num_layers: int,
    hidden_size: int,
    num_attention_heads: int,
    num_kv_heads: int,
    head_dim: int,
    intermediate_size: int,
    vocab_size: int,
    tie_word_embeddings: bool,
    attention_bias: bool = False,
) -> int:
    """Parameters of a Llama-style decoder (GQA attention, gated MLP, RMSNorm) from its shapes."""
    q_size = num_attention_heads * head_dim
    kv_size = num_kv_heads * head_dim
    attention = hidden_size * (q_size + 2 * kv_size) + q_size * hidden_size
    if attention_bias:
        attention += q_size + 2 * kv_size
    mlp = 3 * hidden_size * intermediate_size
    norms = 2 * hidden_size
    embeddings = vocab_size * hidden_size * (1 if tie_word_embeddings else 2)
    return num_layers * (attention + mlp + norms) + hidden_size + embeddings


MODELS: dict[str, ModelSpec] = {
    "llama-3.1-8b": _model(
        "meta-llama/Llama-3.1-8B-Instruct",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        intermediate_size=14336,
        vocab_size=128256,
        max_position_embeddings=131072,
    ),
    "llama-3.1-70b": _model(
        "meta-llama/Llama-3.1-70B-Instruct",
        num_layers=80,
        hidden_size=8192,
        num_attention_heads=64,
        num_kv_heads=8,
        intermediate_size=28672,
        vocab_size=128256,
        max_position_embeddings=131072,
    ),
    "qwen2.5-7b": _model(
        "Qwen/Qwen2.5-7B-Instruct",
        num_layers=28,
        hidden_size=3584,
        num_attention_heads=28,
        num_kv_heads=4,
        intermediate_size=18944,
        vocab_size=152064,
        max_position_embeddings=32768,
    ),
    "qwen2.5-0.5b": _model(
        "Qwen/Qwen2.5-0.5B-Instruct",
        num_layers=24,
        hidden_size=896,
        num_attention_heads=14,
        num_kv_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
    ),
    # Qwen3 sets head_dim (128) apart from hidden_size / heads (64); its per-head q/k norms
    # (7,168 parameters) are left out of the count.
    "qwen3-0.6b": _model(
        "Qwen/Qwen3-0.6B",
        num_layers=28,
        hidden_size=1024,
        num_attention_heads=16,
        num_kv_heads=8,
        intermediate_size=3072,
        vocab_size=151936,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
        head_dim=128,
    ),
    "mistral-7b": _model(
        "mistralai/Mistral-7B-Instruct-v0.3",
        num_layers=32,
        hidden_size=4096,
        num_attention_heads=32,
        num_kv_heads=8,
        intermediate_size=14336,
        vocab_size=32768,
        max_position_embeddings=32768,
    ),
}
"""The model table, keyed by the short names `--model` accepts (a config.json path works too)."""


def host_by_name(name: str) -> HostSpec:
    """The host table entry for `name` (case-insensitive), or a SimConfigError listing the choices."""
    host = HOSTS.get(name.lower())
    if host is None:
        raise SimConfigError(f"unknown host {name!r}; choose one of: {', '.join(HOSTS)}")
    return host


def gpu_by_name(name: str) -> GpuSpec:
    """The table entry for `name` (case-insensitive), or a SimConfigError listing the choices."""
    gpu = GPUS.get(name.lower())
    if gpu is None:
        raise SimConfigError(f"unknown GPU {name!r}; choose one of: {', '.join(GPUS)}")
    return gpu


def model_by_name_or_path(name_or_path: str) -> ModelSpec:
    """A table model by short name or Hugging Face id, or a model read from a config.json path."""
    key = name_or_path.lower()
    if key in MODELS:
        return MODELS[key]
    for model in MODELS.values():
        if model.name.lower() == key:
            return model
    path = Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if path.suffix == ".json" or path.exists():
        return load_hf_config(path)
    raise SimConfigError(
        f"unknown model {name_or_path!r}; choose one of: {', '.join(MODELS)}, "
        "or give the path of a Hugging Face config.json (or of the folder holding it)"
    )


def load_hf_config(path: Path) -> ModelSpec:
    """Read a dense decoder's shapes from a Hugging Face config.json file."""
    try:
        raw: Any = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SimConfigError(f"cannot read model config {path}: {exc.strerror or exc}") from exc
    except json.JSONDecodeError as exc:
        raise SimConfigError(f"model config {path} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise SimConfigError(f"model config {path} must hold a JSON object")
    config: dict[str, Any] = raw.get("text_config", raw) if "text_config" in raw else raw

    def need(key: str) -> int:
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise SimConfigError(
                f"model config {path} needs a positive integer {key!r}, found {value!r}"
            )
        return value

    num_layers = need("num_hidden_layers")
    hidden_size = need("hidden_size")
    num_attention_heads = need("num_attention_heads")
    num_kv_heads = config.get("num_key_value_heads") or num_attention_heads
    head_dim = config.get("head_dim") or hidden_size // num_attention_heads
    if not isinstance(num_kv_heads, int) or not isinstance(head_dim, int):
        raise SimConfigError(f"model config {path}: num_key_value_heads and head_dim must be ints")
    intermediate_size = need("intermediate_size")
    vocab_size = need("vocab_size")
    max_position_embeddings = need("max_position_embeddings")
    tie_word_embeddings = bool(config.get("tie_word_embeddings", False))
    name = config.get("_name_or_path") or raw.get("_name_or_path") or path.parent.name or path.stem
    return ModelSpec(
        name=str(name),
        num_layers=num_layers,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        intermediate_size=intermediate_size,
        vocab_size=vocab_size,
        num_params=count_params(
            num_layers=num_layers,
            hidden_size=hidden_size,
            num_attention_heads=num_attention_heads,
            num_kv_heads=num_kv_heads,
            head_dim=head_dim,
            intermediate_size=intermediate_size,
            vocab_size=vocab_size,
            tie_word_embeddings=tie_word_embeddings,
            attention_bias=bool(config.get("attention_bias", False))
            or config.get("model_type") == "qwen2",
        ),
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=tie_word_embeddings,
    )
