"""SGLang's KV budget in its own arithmetic: a pool of tokens, cut into pages, capped by a flag.

SGLang (0.5.23) sizes its pool once at start: what is free after the weights load, less a slack
of `(1 − mem_fraction_static)` of what was free before, is the pool's bytes; the pool holds
`bytes // bytes_per_token` tokens, floored to whole pages of `page_size`, then held at
`--max-total-tokens` where that is set. The result is `max_total_num_tokens`, which the server
reports. A dtype change leaves the bytes as they were, so the tokens scale by the old element
width over the new, unless the cap holds them. A sequence of L tokens takes ceil(L / page) pages.
Pure functions only; the IO is in sources.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from slotop.actions.budget.kv import (
    BudgetError,
    CapacityChange,
    DtypeBudget,
    KvBudget,
    KvMemory,
    KvShape,
    auto_note,
    dtype_bytes,
    sequences_that_fit,
)
from slotop.collectors.snapshot import KvCacheState

SGLANG_TABLE_DTYPES: tuple[str, ...] = ("auto", "bf16", "fp8_e5m2")
"""The rows of an SGLang budget: `auto` (the model's dtype), then each width SGLang's
`--kv-cache-dtype` takes that slotop sizes (fp8_e4m3 is as wide as fp8_e5m2)."""

SGLANG_FP8 = "fp8_e5m2"
"""The one-byte KV dtype named where SGLang's fp8 is meant (SGLang has no plain `fp8`): the one
tune tries, which keeps bf16's range and needs no scaling factors from the checkpoint."""

SERVER_INFO_KEYS: tuple[str, ...] = (
    "max_total_num_tokens",
    "page_size",
    "kv_cache_dtype",
    "dtype",
    "max_total_tokens",
    "context_length",
    "mem_fraction_static",
    "tp_size",
    "dp_size",
)
"""What a budget reads of SGLang's `/get_server_info` (the rest holds its API key)."""

Basis = Literal["reported", "estimated", "capped", "at least"]
"""Where a row's tokens come from: the server's own figure; scaled from it by element width;
held at `--max-total-tokens`; or a lower bound (the cap hid how large the pool could be)."""

BASIS_WORDS: Mapping[str, str] = {
    "reported": "the server's max_total_num_tokens",
    "estimated": "scaled from it by element width (the pool's bytes stay)",
    "capped": "held at --max-total-tokens",
    "at least": "a lower bound, since --max-total-tokens hides how large the pool would be",
}


@dataclass(frozen=True, slots=True)
class SglangPool:
    """What an SGLang server says of its KV pool; None where it does not say."""

    max_total_num_tokens: int
    page_size_tokens: int = 1
    kv_cache_dtype: str = "auto"
    model_dtype: str | None = None
    max_total_tokens: int | None = None
    context_len_tokens: int | None = None
    mem_fraction_static: float | None = None
    dp_size: int = 1

    def cap_binds(self) -> bool:
        """Whether `--max-total-tokens` holds the pool (it is at the cap, floored to pages)."""
        cap = self.cap_tokens()
        return cap is not None and self.max_total_num_tokens >= cap

    def cap_tokens(self) -> int | None:
        """`--max-total-tokens` floored to whole pages, as SGLang applies it; None when unset."""
        if self.max_total_tokens is None:
            return None
        page = max(1, self.page_size_tokens)
        return self.max_total_tokens // page * page


@dataclass(frozen=True, slots=True)
class TokensAt:
    """The pool's tokens at one dtype, and where the figure comes from."""

    tokens: int
    basis: Basis


def model_dtype_of_server(dtype: object) -> str | None:
    """The model dtype SGLang's `--dtype` names, None for `auto` or anything slotop does not size.

    SGLang's `auto` takes the checkpoint's dtype, but loads a float32 checkpoint in 16 bits.
    """
    if not isinstance(dtype, str):
        return None
    name = dtype.strip().lower().removeprefix("torch.")
    if name == "auto":
        return None
    try:
        dtype_bytes(name)
    except BudgetError:
        return None
    return name


def sglang_auto_dtype(config_dtype: str | None) -> str | None:
    """What SGLang's `--dtype auto` loads a checkpoint of this dtype as: float32 in 16 bits."""
    if config_dtype is not None and dtype_bytes(config_dtype) == 4:
        return "float16"
    return config_dtype


def _width(kv_cache_dtype: str, model_dtype: str | None) -> int:
    """Bytes per element of an SGLang KV dtype; BudgetError for the scaled ones (mxfp8, fp4)."""
    try:
        return dtype_bytes(kv_cache_dtype, model_dtype)
    except BudgetError:
        raise BudgetError(
            f"slotop re-cuts SGLang pools of whole-byte elements only (auto, bf16, bfloat16, "
            f"fp8_e4m3, fp8_e5m2), not --kv-cache-dtype {kv_cache_dtype}, which stores scales "
            "beside its elements"
        ) from None


def tokens_at(pool: SglangPool, kv_cache_dtype: str) -> TokensAt:
    """The tokens SGLang's pool would hold at `kv_cache_dtype`, from what it holds now.

    Same width: the reported figure. Otherwise the bytes stay: tokens × old width // new width,
    floored to pages, held at `--max-total-tokens`. Where the cap holds the pool now, a narrower
    dtype stays at the cap (exact) and a wider one holds at least the scaled figure.
    """
    now = _width(pool.kv_cache_dtype, pool.model_dtype)
    new = _width(kv_cache_dtype, pool.model_dtype)
    reported = pool.max_total_num_tokens
    if new == now:
        return TokensAt(reported, "reported")
    page = max(1, pool.page_size_tokens)
    scaled = reported * now // new // page * page
    cap = pool.cap_tokens()
    if cap is None:
        return TokensAt(scaled, "estimated")
    if pool.cap_binds():
        return TokensAt(cap, "capped") if new < now else TokensAt(scaled, "at least")
    if scaled >= cap:
        return TokensAt(cap, "capped")
    return TokensAt(scaled, "estimated")


def seqs_at(tokens: int, length_tokens: int | None, page_size_tokens: int) -> float | None:
    """Sequences of a length the pool holds at once: pages / ceil(length / page)."""
    page = max(1, page_size_tokens)
    return sequences_that_fit(tokens // page, length_tokens, page)


def sglang_budget(
    pool: SglangPool,
    *,
    shape: KvShape | None = None,
    context_len_tokens: int | None = None,
    avg_len_tokens: int | None = None,
    model: str | None = None,
    dtypes: tuple[str, ...] = SGLANG_TABLE_DTYPES,
) -> KvBudget:
    """A budget of a live SGLang replica: its reported pool at its dtype, the others scaled.

    Bytes per token come from the model's shape when given; SGLang does not report them.
    """
    model_dtype = pool.model_dtype
    if model_dtype is None and shape is not None:
        model_dtype = sglang_auto_dtype(shape.model_dtype)
    pool = replace(pool, model_dtype=model_dtype)
    page = max(1, pool.page_size_tokens)
    context = context_len_tokens or pool.context_len_tokens
    names = dtypes if pool.kv_cache_dtype in dtypes else (*dtypes, pool.kv_cache_dtype)
    rows = []
    for name in names:
        at = tokens_at(pool, name)
        width = _width(name, model_dtype)
        per_token = shape.elements_per_token() * width if shape is not None else None
        rows.append(
            DtypeBudget(
                kv_cache_dtype=name,
                dtype_bytes=width,
                bytes_per_token=per_token,
                bytes_per_block=per_token * page if per_token is not None else None,
                kv_blocks=at.tokens // page,
                kv_tokens=at.tokens,
                seqs_at_max_context=seqs_at(at.tokens, context, page),
                seqs_at_avg_len=seqs_at(at.tokens, avg_len_tokens, page),
                basis=at.basis,
            )
        )
    notes = []
    auto = auto_note(model_dtype)
    if auto:
        notes.append(auto)
    cap = pool.cap_tokens()
    if cap is not None:
        notes.append(
            f"--max-total-tokens {pool.max_total_tokens:,} caps the pool"
            + (" and holds it now" if pool.cap_binds() else "; it does not bind now")
        )
    if context is None:
        notes.append("the context length is unknown: give --max-model-len or --config-json")
    if pool.dp_size > 1:
        notes.append(
            f"the replica runs {pool.dp_size} data-parallel ranks; this is one rank's pool"
        )
    current = pool.max_total_num_tokens * (
        shape.elements_per_token() * _width(pool.kv_cache_dtype, model_dtype)
        if shape is not None
        else 0
    )
    return KvBudget(
        source="sglang",
        model=model,
        shape=shape,
        memory=KvMemory(current) if current else None,
        block_size_tokens=page,
        max_model_len_tokens=context,
        avg_len_tokens=avg_len_tokens,
        current_dtype=pool.kv_cache_dtype,
        rows=tuple(rows),
        notes=tuple(notes),
        engine="sglang",
    )


def pool_from_server_info(info: Mapping[str, object]) -> SglangPool:
    """Read the pool from `/get_server_info`'s keys; BudgetError when it gives no
    `max_total_num_tokens` (not SGLang, or not started)."""

    def whole(key: str) -> int | None:
        value = info.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return None
        return value

    tokens = whole("max_total_num_tokens")
    if tokens is None:
        raise BudgetError(
            "the server's /get_server_info gives no max_total_num_tokens: is it SGLang, and "
            "has it sized its KV cache?"
        )
    dtype = info.get("kv_cache_dtype")
    fraction = info.get("mem_fraction_static")
    return SglangPool(
        max_total_num_tokens=tokens,
        page_size_tokens=whole("page_size") or 1,
        kv_cache_dtype=dtype if isinstance(dtype, str) and dtype else "auto",
        model_dtype=model_dtype_of_server(info.get("dtype")),
        max_total_tokens=whole("max_total_tokens"),
        context_len_tokens=whole("context_length"),
        mem_fraction_static=float(fraction) if isinstance(fraction, int | float) else None,
        dp_size=whole("dp_size") or 1,
    )


def sglang_capacity_change(
    kv: KvCacheState,
    new_dtype: str,
    *,
    model_dtype: str | None = None,
    max_total_tokens: int | None = None,
    cap_known: bool = False,
) -> CapacityChange:
    """What an SGLang dtype change should do to its pool, from the cache a snapshot shows.

    `cap_known` says whether `max_total_tokens` is known (None then means no cap); when it is
    not, the figures assume no cap and a note says a cap would hold them.
    """
    if kv.size_tokens is None:
        raise BudgetError("the replica did not say its max_total_num_tokens")
    page = kv.block_size_tokens or 1
    context = round(kv.size_tokens / kv.max_concurrency) if kv.max_concurrency else None
    pool = SglangPool(
        max_total_num_tokens=kv.size_tokens,
        page_size_tokens=page,
        kv_cache_dtype=kv.cache_dtype or "auto",
        model_dtype=model_dtype,
        max_total_tokens=max_total_tokens if cap_known else None,
        context_len_tokens=context,
    )
    after = tokens_at(pool, new_dtype)
    old = _width(pool.kv_cache_dtype, model_dtype)
    new = _width(new_dtype, model_dtype)
    notes: list[str] = []
    if model_dtype is None and "auto" in (pool.kv_cache_dtype, new_dtype):
        note = auto_note(model_dtype)
        if note:
            notes.append(note)
    if after.basis == "capped":
        notes.append(f"--max-total-tokens {max_total_tokens:,} holds it")
    elif after.basis == "at least":
        notes.append(f"at least: --max-total-tokens {max_total_tokens:,} holds it now")
    elif not cap_known and new < old:
        notes.append("unless --max-total-tokens caps it")
    elif not cap_known and new > old:
        notes.append("more where --max-total-tokens holds the pool now")
    return CapacityChange(
        from_dtype=pool.kv_cache_dtype,
        to_dtype=new_dtype,
        from_bytes=old,
        to_bytes=new,
        blocks_before=kv.size_tokens // page,
        blocks_after=after.tokens // page,
        tokens_before=kv.size_tokens,
        tokens_after=after.tokens,
        seqs_at_max_context_before=seqs_at(kv.size_tokens, context, page),
        seqs_at_max_context_after=seqs_at(after.tokens, context, page),
        ratio=old / new if after.basis == "estimated" else after.tokens / kv.size_tokens,
        notes=tuple(notes),
        engine="sglang",
        basis=after.basis,
        cap_known=cap_known,
    )


def launch_flag(argv: Sequence[str], flag: str) -> str | None:
    """The value a launch command gives a flag (`FLAG VALUE` or `FLAG=VALUE`, the last one
    given), None when it gives none."""
    value: str | None = None
    for index, argument in enumerate(argv):
        if argument == flag and index + 1 < len(argv):
            value = argv[index + 1]
        elif argument.startswith(flag + "="):
            value = argument.split("=", 1)[1]
    return value


def max_total_tokens_of(argv: Sequence[str]) -> int | None:
    """The `--max-total-tokens` an SGLang launch command sets, None when it sets none (or a
    value that is not a positive whole number)."""
    value = launch_flag(argv, "--max-total-tokens")
    if value is None or not value.strip().isdigit():
        return None
    return int(value) or None
