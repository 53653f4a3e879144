"""The KV-cache budget in bytes: per token, per block, tokens and sequences that fit, per dtype.

One token's KV cache on one GPU takes `2 × layers × kv_heads_per_gpu × head_dim × dtype_bytes`
(K and V, every layer); KV heads split across tensor-parallel ranks and are replicated when there
are fewer heads than ranks. Models with multi-head latent attention (DeepSeek-style MLA) keep one
latent of `kv_lora_rank + qk_rope_head_dim` per layer instead, replicated on every rank. The
pool is cut into blocks of `block_size` tokens; vLLM counts the sequences that fit at max
context as `blocks / ceil(max_model_len / block_size)`. Pure functions only; the IO that feeds
them lives in budget_sources.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from slotop.actions.errors import ActionError
from slotop.collectors.snapshot import KvCacheState

GIB = 1 << 30
DEFAULT_BLOCK_SIZE_TOKENS = 16
DEFAULT_OVERHEAD_GIB = 2.0
"""Per-GPU memory besides weights and KV (activation peak, CUDA graphs, CUDA context): a round
estimate; the replica's start-up log gives the real figure."""

ASSUMED_AUTO_BYTES = 2
"""What `auto` takes when the model's dtype is unknown: the 16-bit weights most checkpoints ship."""

DTYPE_BYTES: Mapping[str, int] = {
    "float32": 4,
    "fp32": 4,
    "float": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
}
"""Bytes per element of the dtypes a KV cache (or, for `auto`, the model) is stored in."""

TABLE_DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "fp8")
"""The rows of a budget: the model's own dtype, then one dtype per element width."""


class BudgetError(ActionError):
    """A KV budget cannot be computed from what was given; the message says what is missing."""


def dtype_bytes(kv_cache_dtype: str, model_dtype: str | None = None) -> int:
    """Bytes per KV element for a `--kv-cache-dtype` value; `auto` takes the model's dtype."""
    name = kv_cache_dtype.strip().lower().removeprefix("torch.")
    if name == "auto":
        if model_dtype is None:
            return ASSUMED_AUTO_BYTES
        return dtype_bytes(model_dtype)
    try:
        return DTYPE_BYTES[name]
    except KeyError:
        known = ", ".join(["auto", *DTYPE_BYTES])
        raise BudgetError(
            f"unknown dtype {kv_cache_dtype!r}: slotop sizes {known}; "
            "give one of those or size the cache from a live replica (--url)"
        ) from None


@dataclass(frozen=True, slots=True)
class KvShape:
    """What sizes one token's KV cache on one GPU; `mla_latent_dim` set for latent attention."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    tensor_parallel_size: int = 1
    model_dtype: str | None = None
    mla_latent_dim: int | None = None

    @property
    def kv_heads_per_gpu(self) -> int:
        """KV heads one rank holds: split across ranks, at least one (replicated)."""
        return max(1, self.num_kv_heads // max(1, self.tensor_parallel_size))

    def elements_per_token(self) -> int:
        """KV elements of one token on one GPU, over all layers."""
        if self.mla_latent_dim is not None:
            return self.num_layers * self.mla_latent_dim
        return 2 * self.num_layers * self.kv_heads_per_gpu * self.head_dim


def kv_bytes_per_token(shape: KvShape, kv_cache_dtype: str = "auto") -> int:
    """Per-GPU KV bytes of one token: 2 × layers × kv_heads_per_gpu × head_dim × dtype bytes."""
    return shape.elements_per_token() * dtype_bytes(kv_cache_dtype, shape.model_dtype)


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


@dataclass(frozen=True, slots=True)
class KvMemory:
    """The bytes the KV cache gets on one GPU, with the parts it was worked out from."""

    kv_cache_bytes: int
    gpu_memory_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    weights_bytes: int | None = None
    overhead_bytes: int | None = None


def kv_memory(
    gpu_memory_bytes: int, gpu_memory_utilization: float, weights_bytes: int, overhead_bytes: int
) -> KvMemory:
    """What vLLM leaves for the KV cache: ceil(memory × utilisation) − weights − overheads."""
    if not 0 < gpu_memory_utilization <= 1:
        raise BudgetError(
            f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization:g}"
        )
    requested = math.ceil(gpu_memory_bytes * gpu_memory_utilization)
    left = requested - weights_bytes - overhead_bytes
    if left <= 0:
        raise BudgetError(
            f"nothing is left for the KV cache: weights {weights_bytes / GIB:.2f} GiB and "
            f"overheads {overhead_bytes / GIB:.2f} GiB take all {requested / GIB:.2f} GiB that "
            f"utilisation {gpu_memory_utilization:g} allows; raise the utilisation or the "
            "tensor parallel size"
        )
    return KvMemory(left, gpu_memory_bytes, gpu_memory_utilization, weights_bytes, overhead_bytes)


def blocks_per_sequence(length_tokens: int, block_size_tokens: int) -> int:
    """Blocks one sequence of `length_tokens` holds: ceil(length / block size)."""
    return -(-length_tokens // block_size_tokens)


def sequences_that_fit(
    blocks: int, length_tokens: int | None, block_size_tokens: int
) -> float | None:
    """Sequences of a length the pool holds at once, as vLLM's max concurrency counts them."""
    if length_tokens is None or length_tokens <= 0 or block_size_tokens <= 0:
        return None
    return blocks / blocks_per_sequence(length_tokens, block_size_tokens)


@dataclass(frozen=True, slots=True)
class DtypeBudget:
    """The cache at one KV dtype: bytes per token and block, blocks, tokens and sequences."""

    kv_cache_dtype: str
    dtype_bytes: int
    bytes_per_token: int | None
    bytes_per_block: int | None
    kv_blocks: int
    kv_tokens: int
    seqs_at_max_context: float | None
    seqs_at_avg_len: float | None


@dataclass(frozen=True, slots=True)
class KvBudget:
    """A KV budget: where its numbers came from, its inputs, and one row per dtype."""

    source: str
    model: str | None
    shape: KvShape | None
    memory: KvMemory | None
    block_size_tokens: int
    max_model_len_tokens: int | None
    avg_len_tokens: int | None
    current_dtype: str | None
    rows: tuple[DtypeBudget, ...]
    notes: tuple[str, ...] = ()

    def row(self, kv_cache_dtype: str) -> DtypeBudget | None:
        """The row of one dtype, None when the budget has none."""
        return next((r for r in self.rows if r.kv_cache_dtype == kv_cache_dtype), None)


def _row(
    name: str,
    width: int,
    per_token: int | None,
    blocks: int,
    block_size: int,
    max_len: int | None,
    avg_len: int | None,
) -> DtypeBudget:
    return DtypeBudget(
        kv_cache_dtype=name,
        dtype_bytes=width,
        bytes_per_token=per_token,
        bytes_per_block=per_token * block_size if per_token is not None else None,
        kv_blocks=blocks,
        kv_tokens=blocks * block_size,
        seqs_at_max_context=sequences_that_fit(blocks, max_len, block_size),
        seqs_at_avg_len=sequences_that_fit(blocks, avg_len, block_size),
    )


def _auto_note(model_dtype: str | None) -> str | None:
    if model_dtype is not None:
        return None
    return (
        f"auto taken as {ASSUMED_AUTO_BYTES} bytes (a 16-bit model); "
        "a float32 model doubles it: give its config.json to know"
    )


def _rows_from_elements(
    elements_per_token: int,
    model_dtype: str | None,
    kv_cache_bytes: int,
    block_size_tokens: int,
    max_model_len_tokens: int | None,
    avg_len_tokens: int | None,
    dtypes: tuple[str, ...],
) -> tuple[DtypeBudget, ...]:
    if block_size_tokens <= 0:
        raise BudgetError(
            f"block size must be a positive number of tokens, got {block_size_tokens}"
        )
    rows = []
    for name in dtypes:
        width = dtype_bytes(name, model_dtype)
        per_token = elements_per_token * width
        blocks = kv_cache_bytes // (per_token * block_size_tokens)
        rows.append(
            _row(
                name,
                width,
                per_token,
                blocks,
                block_size_tokens,
                max_model_len_tokens,
                avg_len_tokens,
            )
        )
    return tuple(rows)


def budget_from_shape(
    shape: KvShape,
    memory: KvMemory,
    *,
    block_size_tokens: int = DEFAULT_BLOCK_SIZE_TOKENS,
    max_model_len_tokens: int | None = None,
    avg_len_tokens: int | None = None,
    current_dtype: str | None = None,
    model: str | None = None,
    source: str = "config",
    notes: tuple[str, ...] = (),
    dtypes: tuple[str, ...] = TABLE_DTYPES,
) -> KvBudget:
    """Size the cache at each dtype from a model's shape and the KV memory: floor(bytes / block)."""
    rows = _rows_from_elements(
        shape.elements_per_token(),
        shape.model_dtype,
        memory.kv_cache_bytes,
        block_size_tokens,
        max_model_len_tokens,
        avg_len_tokens,
        dtypes,
    )
    auto = _auto_note(shape.model_dtype) if "auto" in dtypes else None
    return KvBudget(
        source=source,
        model=model,
        shape=shape,
        memory=memory,
        block_size_tokens=block_size_tokens,
        max_model_len_tokens=max_model_len_tokens,
        avg_len_tokens=avg_len_tokens,
        current_dtype=current_dtype,
        rows=rows,
        notes=notes + ((auto,) if auto else ()),
    )


def _report_int(report: Mapping[str, object], key: str) -> int:
    value = report.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise BudgetError(f"the simulator's sizing has no integer {key!r}: got {value!r}")
    return value


def budget_from_sim_report(
    report: Mapping[str, object],
    *,
    avg_len_tokens: int | None = None,
    dtypes: tuple[str, ...] = TABLE_DTYPES,
) -> KvBudget:
    """A budget from `slotop sim --dry-run --json`: its KV bytes and per-token size, re-cut per dtype.

    The simulator's tables hold 16-bit (bf16) checkpoints, so `auto` is 2 bytes there.
    """
    width = _report_int(report, "dtype_bytes")
    elements = _report_int(report, "bytes_per_token") // width
    kv_bytes = _report_int(report, "available_kv_cache_bytes")
    block_size = _report_int(report, "block_size")
    max_len = _report_int(report, "max_model_len")
    util = report.get("gpu_memory_utilization")
    gpu = report.get("device_name") or report.get("gpu")
    overheads = [report.get(k) for k in ("activation_peak_bytes", "non_torch_bytes")]
    weights = report.get("weights_bytes")
    memory = KvMemory(
        kv_cache_bytes=kv_bytes,
        gpu_memory_bytes=_report_int(report, "total_gpu_memory_bytes"),
        gpu_memory_utilization=float(util) if isinstance(util, int | float) else None,
        weights_bytes=weights if isinstance(weights, int) else None,
        overhead_bytes=(
            sum(v for v in overheads if isinstance(v, int))
            if all(isinstance(v, int) for v in overheads)
            else None
        ),
    )
    model = report.get("model")
    return KvBudget(
        source="simulator",
        model=f"{model} on {gpu}" if isinstance(model, str) and gpu else None,
        shape=None,
        memory=memory,
        block_size_tokens=block_size,
        max_model_len_tokens=max_len,
        avg_len_tokens=avg_len_tokens,
        current_dtype=str(report.get("cache_dtype") or "auto"),
        rows=_rows_from_elements(
            elements, "bfloat16", kv_bytes, block_size, max_len, avg_len_tokens, dtypes
        ),
        notes=("weights and overheads are the simulator's estimates, not a measurement",),
    )


def scaled_blocks(blocks: int, from_bytes: int, to_bytes: int) -> int:
    """Blocks the same KV memory holds at another element width: floor(blocks × from / to)."""
    return blocks * from_bytes // to_bytes


@dataclass(frozen=True, slots=True)
class CacheInfo:
    """What a live replica's `vllm:cache_config_info` says, for one engine; None where silent."""

    num_gpu_blocks: int
    block_size_tokens: int
    cache_dtype: str
    gpu_memory_utilization: float | None = None
    kv_cache_memory_bytes: int | None = None
    kv_cache_size_tokens: int | None = None
    max_concurrency: float | None = None

    def max_model_len_tokens(self) -> int | None:
        """The max context the replica sized for: its KV tokens over its max concurrency."""
        if not self.kv_cache_size_tokens or not self.max_concurrency:
            return None
        return round(self.kv_cache_size_tokens / self.max_concurrency)


_NO_VALUE = frozenset({"", "None", "none", "null", "nan", "NaN"})


def _label_number(labels: Mapping[str, str], name: str) -> float | None:
    text = labels.get(name)
    if text is None or text in _NO_VALUE:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def cache_info_from_labels(labels: Mapping[str, str]) -> CacheInfo:
    """Read the labels of one `vllm:cache_config_info` sample; BudgetError without blocks or size."""
    blocks = _label_number(labels, "num_gpu_blocks")
    block_size = _label_number(labels, "block_size")
    if blocks is None or block_size is None or blocks <= 0 or block_size <= 0:
        raise BudgetError(
            "vllm:cache_config_info gives no num_gpu_blocks or block_size: the replica has not "
            "sized its KV cache yet (still starting?) or is too old to say"
        )
    memory = _label_number(labels, "kv_cache_memory_bytes")
    tokens = _label_number(labels, "kv_cache_size_tokens")
    dtype = labels.get("cache_dtype")
    return CacheInfo(
        num_gpu_blocks=int(blocks),
        block_size_tokens=int(block_size),
        cache_dtype=dtype if dtype and dtype not in _NO_VALUE else "auto",
        gpu_memory_utilization=_label_number(labels, "gpu_memory_utilization"),
        kv_cache_memory_bytes=int(memory) if memory else None,
        kv_cache_size_tokens=int(tokens) if tokens else None,
        max_concurrency=_label_number(labels, "kv_cache_max_concurrency"),
    )


def budget_from_cache_info(
    info: CacheInfo,
    *,
    shape: KvShape | None = None,
    max_model_len_tokens: int | None = None,
    avg_len_tokens: int | None = None,
    model: str | None = None,
    dtypes: tuple[str, ...] = TABLE_DTYPES,
) -> KvBudget:
    """A budget from a live replica: its measured blocks, scaled to each dtype by element width.

    The KV memory stays when the dtype changes, so the blocks scale by the ratio of widths.
    Bytes per token come from the model's shape when given, else from the replica's KV memory
    over its tokens where it reports that memory (vLLM CPU does).
    """
    model_dtype = shape.model_dtype if shape is not None else None
    current = dtype_bytes(info.cache_dtype, model_dtype)
    block_size = info.block_size_tokens
    measured_per_token = (
        info.kv_cache_memory_bytes // (info.num_gpu_blocks * block_size)
        if info.kv_cache_memory_bytes
        else None
    )
    max_len = max_model_len_tokens or info.max_model_len_tokens()
    notes: list[str] = []
    rows = []
    for name in dtypes:
        width = dtype_bytes(name, model_dtype)
        if shape is not None:
            per_token: int | None = shape.elements_per_token() * width
        elif measured_per_token is not None:
            per_token = measured_per_token * width // current
        else:
            per_token = None
        blocks = scaled_blocks(info.num_gpu_blocks, current, width)
        rows.append(_row(name, width, per_token, blocks, block_size, max_len, avg_len_tokens))
    if shape is not None and measured_per_token is not None:
        expected = shape.elements_per_token() * current
        if expected != measured_per_token:
            notes.append(
                f"the replica stores {measured_per_token} B/token but the config gives "
                f"{expected} B/token at {info.cache_dtype}: is it the same model and TP size?"
            )
    auto = _auto_note(model_dtype) if "auto" in dtypes or info.cache_dtype == "auto" else None
    if auto:
        notes.append(auto)
    kv_bytes = info.kv_cache_memory_bytes
    if kv_bytes is None and shape is not None:
        kv_bytes = info.num_gpu_blocks * block_size * shape.elements_per_token() * current
    memory = (
        KvMemory(kv_bytes, gpu_memory_utilization=info.gpu_memory_utilization) if kv_bytes else None
    )
    return KvBudget(
        source="replica",
        model=model,
        shape=shape,
        memory=memory,
        block_size_tokens=block_size,
        max_model_len_tokens=max_len,
        avg_len_tokens=avg_len_tokens,
        current_dtype=info.cache_dtype,
        rows=tuple(rows),
        notes=tuple(notes),
    )


@dataclass(frozen=True, slots=True)
class CapacityChange:
    """What a KV dtype change does to the cache: blocks, tokens and sequences before and after."""

    from_dtype: str
    to_dtype: str
    from_bytes: int
    to_bytes: int
    blocks_before: int | None
    blocks_after: int | None
    tokens_before: int | None
    tokens_after: int | None
    seqs_at_max_context_before: float | None
    seqs_at_max_context_after: float | None
    ratio: float
    notes: tuple[str, ...] = ()


def expected_capacity_change(
    current: KvCacheState,
    new_dtype: str,
    *,
    model_dtype: str | None = None,
    max_model_len_tokens: int | None = None,
) -> CapacityChange:
    """The capacity a restart at `new_dtype` should show, from the replica's cache now.

    The KV memory does not depend on the dtype, so blocks scale by old width over new width
    (floored, as vLLM floors its block count); None where the replica did not say.
    """
    old_name = current.cache_dtype or "auto"
    old = dtype_bytes(old_name, model_dtype)
    new = dtype_bytes(new_dtype, model_dtype)
    blocks = current.blocks_total
    block_size = current.block_size_tokens
    after = scaled_blocks(blocks, old, new) if blocks is not None else None
    max_len = max_model_len_tokens
    if max_len is None and current.size_tokens and current.max_concurrency:
        max_len = round(current.size_tokens / current.max_concurrency)
    notes = []
    if model_dtype is None and "auto" in (old_name, new_dtype) and old_name != new_dtype:
        note = _auto_note(model_dtype)
        if note:
            notes.append(note)

    def seqs(count: int | None) -> float | None:
        if count is None or block_size is None:
            return None
        return sequences_that_fit(count, max_len, block_size)

    return CapacityChange(
        from_dtype=old_name,
        to_dtype=new_dtype,
        from_bytes=old,
        to_bytes=new,
        blocks_before=blocks,
        blocks_after=after,
        tokens_before=blocks * block_size if blocks is not None and block_size else None,
        tokens_after=after * block_size if after is not None and block_size else None,
        seqs_at_max_context_before=seqs(blocks),
        seqs_at_max_context_after=seqs(after),
        ratio=old / new,
        notes=tuple(notes),
    )


def describe_capacity_change(change: CapacityChange) -> str:
    """One line for a restart plan: the dtype change and what it does to blocks and sequences."""
    head = (
        f"KV cache {change.from_dtype} ({change.from_bytes} B) → {change.to_dtype} "
        f"({change.to_bytes} B): ×{change.ratio:g} capacity"
    )
    parts = []
    if change.blocks_before is not None and change.blocks_after is not None:
        parts.append(f"blocks {change.blocks_before:,} → {change.blocks_after:,}")
    if change.tokens_before is not None and change.tokens_after is not None:
        parts.append(f"tokens {change.tokens_before:,} → {change.tokens_after:,}")
    before, after = change.seqs_at_max_context_before, change.seqs_at_max_context_after
    if before is not None and after is not None:
        parts.append(f"sequences at max context {before:.1f} → {after:.1f}")
    return head + (" (" + ", ".join(parts) + ")" if parts else "")


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
    memory = kv_memory(gpu_memory_bytes, gpu_memory_utilization, weights_bytes, overhead_bytes)
    return budget_from_shape(
        shape,
        memory,
        block_size_tokens=block_size_tokens,
        max_model_len_tokens=max_model_len_tokens or max_model_len_of(config),
        avg_len_tokens=avg_len_tokens,
        model=model,
        source="config",
        notes=tuple(notes),
    )
