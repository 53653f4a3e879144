"""The KV-cache budget in bytes: per token, per block, tokens and sequences that fit, per dtype.

One token's KV cache on one GPU takes `2 × layers × kv_heads_per_gpu × head_dim × dtype_bytes`
(K and V, every layer); KV heads split across tensor-parallel ranks and are replicated when there
are fewer heads than ranks. Models with multi-head latent attention (DeepSeek-style MLA) keep one
latent of `kv_lora_rank + qk_rope_head_dim` per layer instead, replicated on every rank. The
pool is cut into blocks of `block_size` tokens; vLLM counts the sequences that fit at max
context as `blocks / ceil(max_model_len / block_size)`. Pure functions only: config.json reading
is in config_json.py, reported sizings in readings.py, the IO in sources.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from slotop.actions.errors import ActionError
from slotop.collectors.names import Engine
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

TABLE_DTYPES: tuple[str, ...] = ("auto", "bfloat16", "fp8")
"""The rows of a budget: `auto` (the model's dtype: 4 bytes for a float32 model), then each
width `--kv-cache-dtype` takes (float16 is as wide as bfloat16)."""


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
    basis: str | None = None
    """Where the tokens come from, where a source tells them apart (SGLang: reported, estimated,
    capped, at least); blocks are SGLang's pages."""


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
    engine: Engine = "vllm"

    def row(self, kv_cache_dtype: str) -> DtypeBudget | None:
        """The row of one dtype, None when the budget has none."""
        return next((r for r in self.rows if r.kv_cache_dtype == kv_cache_dtype), None)


def dtype_row(
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


def auto_note(model_dtype: str | None) -> str | None:
    if model_dtype is not None:
        return None
    return (
        f"auto taken as {ASSUMED_AUTO_BYTES} bytes (a 16-bit model); "
        "a float32 model doubles it: give its config.json to know"
    )


def rows_from_elements(
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
            dtype_row(
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
    rows = rows_from_elements(
        shape.elements_per_token(),
        shape.model_dtype,
        memory.kv_cache_bytes,
        block_size_tokens,
        max_model_len_tokens,
        avg_len_tokens,
        dtypes,
    )
    auto = auto_note(shape.model_dtype) if "auto" in dtypes else None
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


def scaled_blocks(blocks: int, from_bytes: int, to_bytes: int) -> int:
    """Blocks the same KV memory holds at another element width: floor(blocks × from / to)."""
    return blocks * from_bytes // to_bytes


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
    engine: Engine = "vllm"
    basis: str | None = None
    """Where SGLang's tokens after come from (estimated, capped, at least, reported)."""
    cap_known: bool = True
    """False where a cap on SGLang's pool could hold the tokens after, unseen."""


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
        note = auto_note(model_dtype)
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
    pages = change.engine == "sglang"
    blocks = change.blocks_before is not None and change.blocks_after is not None
    if blocks and (not pages or change.blocks_before != change.tokens_before):
        unit = "pages" if pages else "blocks"
        parts.append(f"{unit} {change.blocks_before:,} → {change.blocks_after:,}")
    if change.tokens_before is not None and change.tokens_after is not None:
        parts.append(f"tokens {change.tokens_before:,} → {change.tokens_after:,}")
    before, after = change.seqs_at_max_context_before, change.seqs_at_max_context_after
    if before is not None and after is not None:
        parts.append(f"sequences at max context {before:.1f} → {after:.1f}")
    if pages:
        parts += list(change.notes)
    return head + (" (" + ", ".join(parts) + ")" if parts else "")
