"""A model's KV shape and weights from its Hugging Face config.json, and a budget from them.

Reads the keys decoder configs use (Llama, Qwen, Mistral, GPT-2, Falcon, DeepSeek's latent
attention, multimodal `text_config`), estimates the weights from the layer shapes, and leaves
GPU memory × utilisation − weights − overheads to the KV cache.
"""

from __future__ import annotations

from collections.abc import Mapping

from slotop.actions.budget.kv import (
    ASSUMED_AUTO_BYTES,
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_OVERHEAD_GIB,
    DTYPE_BYTES,
    GIB,
    BudgetError,
    KvBudget,
    KvShape,
    budget_from_shape,
    dtype_bytes,
    kv_memory,
)


def _int_key(config: Mapping[str, object], *keys: str) -> int | None:
    for key in keys:
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _text_config(config: Mapping[str, object]) -> Mapping[str, object]:
    """The language model's part of a config: `text_config` for multimodal checkpoints."""
    nested = config.get("text_config")
    if isinstance(nested, Mapping) and "num_hidden_layers" not in config:
        merged: dict[str, object] = {k: v for k, v in config.items() if k != "text_config"}
        merged.update(nested)
        return merged
    return config


def model_dtype_of(config: Mapping[str, object]) -> str | None:
    """The weights' dtype a config names (`torch_dtype`, or `dtype` in newer files)."""
    text = _text_config(config)
    for key in ("torch_dtype", "dtype"):
        value = text.get(key)
        if isinstance(value, str) and value.strip().lower().removeprefix("torch.") in DTYPE_BYTES:
            return value.strip().lower().removeprefix("torch.")
    return None


def kv_shape_from_config(
    config: Mapping[str, object], *, tensor_parallel_size: int = 1, where: str = "config.json"
) -> KvShape:
    """Read layers, KV heads and head size from a Hugging Face config; BudgetError naming a gap."""
    if tensor_parallel_size < 1:
        raise BudgetError(f"tensor parallel size must be at least 1, got {tensor_parallel_size}")
    text = _text_config(config)
    layers = _int_key(text, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = _int_key(text, "num_attention_heads", "n_head", "num_heads")
    if layers is None or heads is None:
        missing = "num_hidden_layers" if layers is None else "num_attention_heads"
        raise BudgetError(
            f"{where} has no positive {missing}: is it a decoder model's config.json?"
        )
    kv_heads = _int_key(text, "num_key_value_heads", "num_kv_heads", "n_head_kv")
    if kv_heads is None:
        kv_heads = _int_key(text, "multi_query_group_num")
    if kv_heads is None:
        kv_heads = 1 if text.get("multi_query") is True else heads
    head_dim = _int_key(text, "head_dim")
    if head_dim is None:
        hidden = _int_key(text, "hidden_size", "n_embd", "d_model")
        if hidden is None:
            raise BudgetError(f"{where} gives neither head_dim nor hidden_size")
        head_dim = hidden // heads
    lora_rank = _int_key(text, "kv_lora_rank")
    rope_dim = _int_key(text, "qk_rope_head_dim")
    latent = lora_rank + rope_dim if lora_rank is not None and rope_dim is not None else None
    return KvShape(
        num_layers=layers,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        tensor_parallel_size=tensor_parallel_size,
        model_dtype=model_dtype_of(config),
        mla_latent_dim=latent,
    )


def max_model_len_of(config: Mapping[str, object]) -> int | None:
    """The longest context a config allows, None when it does not say."""
    return _int_key(
        _text_config(config), "max_position_embeddings", "n_positions", "max_sequence_length"
    )


def estimate_weight_bytes(
    config: Mapping[str, object], tensor_parallel_size: int = 1
) -> int | None:
    """Per-GPU weight bytes of a dense or mixture-of-experts decoder, None when keys are missing.

    Embeddings (twice unless tied), per layer the Q/K/V/O projections and a gated MLP (three
    matrices; every expert's for MoE), in the config's dtype, split evenly across ranks.
    """
    text = _text_config(config)
    hidden = _int_key(text, "hidden_size", "n_embd", "d_model")
    vocab = _int_key(text, "vocab_size")
    ffn = _int_key(text, "intermediate_size", "ffn_dim", "n_inner")
    try:
        shape = kv_shape_from_config(config)
    except BudgetError:
        return None
    if hidden is None or vocab is None or ffn is None:
        return None
    heads = _int_key(text, "num_attention_heads", "n_head", "num_heads") or 1
    embeddings = vocab * hidden * (1 if text.get("tie_word_embeddings") is True else 2)
    attention = (
        hidden * heads * shape.head_dim * 2 + hidden * shape.num_kv_heads * shape.head_dim * 2
    )
    experts = _int_key(text, "num_local_experts", "num_experts", "n_routed_experts")
    expert_ffn = _int_key(text, "moe_intermediate_size") or ffn
    shared = _int_key(text, "n_shared_experts") or 0
    mlp = 3 * hidden * (expert_ffn * (experts + shared) if experts else ffn)
    params = embeddings + shape.num_layers * (attention + mlp)
    width = dtype_bytes(shape.model_dtype) if shape.model_dtype else ASSUMED_AUTO_BYTES
    return params * width // max(1, tensor_parallel_size)


def _model_name(config: Mapping[str, object]) -> str | None:
    """What a config calls its model: `_name_or_path`, else its first architecture."""
    name = config.get("_name_or_path")
    if isinstance(name, str) and name:
        return name
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def budget_from_config(
    config: Mapping[str, object],
    *,
    gpu_memory_bytes: int,
    gpu_memory_utilization: float = 0.9,
    tensor_parallel_size: int = 1,
    weights_bytes: int | None = None,
    overhead_bytes: int = int(DEFAULT_OVERHEAD_GIB * GIB),
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS,
    max_model_len_tokens: int | None = None,
    avg_len_tokens: int | None = None,
    model: str | None = None,
    where: str = "config.json",
) -> KvBudget:
    """A budget from a model's config.json and one GPU's memory; weights estimated unless given."""
    shape = kv_shape_from_config(config, tensor_parallel_size=tensor_parallel_size, where=where)
    notes: list[str] = []
    if weights_bytes is None:
        weights_bytes = estimate_weight_bytes(config, tensor_parallel_size)
        if weights_bytes is None:
            raise BudgetError(
                f"{where} lacks hidden_size, intermediate_size or vocab_size to estimate the "
                "weights: give the weights' size per GPU (--weights-gib)"
            )
        notes.append(
            "weights estimated from the config's shapes"
            + (" (it is quantised: give --weights-gib)" if "quantization_config" in config else "")
        )
    notes.append(f"overheads taken as {overhead_bytes / GIB:.2f} GiB per GPU (an estimate)")
    window = _int_key(_text_config(config), "sliding_window")
    if window is not None:
        notes.append(
            f"the config names a sliding window of {window:,} tokens: vLLM keeps only the window "
            "on those layers, so long sequences need fewer bytes than this table counts"
        )
    memory = kv_memory(gpu_memory_bytes, gpu_memory_utilization, weights_bytes, overhead_bytes)
    return budget_from_shape(
        shape,
        memory,
        block_size_tokens=block_size_tokens,
        max_model_len_tokens=max_model_len_tokens or max_model_len_of(config),
        avg_len_tokens=avg_len_tokens,
        model=model or _model_name(config),
        source="config",
        notes=tuple(notes),
    )
