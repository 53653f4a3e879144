"""The KV budget a tune plans with: bytes per token and sequences that fit, per KV dtype (pure).

Method step 3 before any load: how many sequences the cache holds at max context and at the
probe's request length, at the replica's dtype and at each narrower one. The figures come from
the replica's own `vllm:cache_config_info` (`slotop budget --url`), scaled by element width.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from slotop.actions.budget.kv import KvBudget, dtype_bytes
from slotop.collectors.names import Engine
from slotop.collectors.snapshot import KvCacheState

SMALLER_KV_DTYPE = "fp8"
"""The narrowest KV dtype tune tries on vLLM (one byte per element); vLLM takes it on GPU and CPU."""

SMALLER_KV_DTYPES: Mapping[Engine, str] = MappingProxyType(
    {"vllm": SMALLER_KV_DTYPE, "sglang": "fp8_e5m2"}
)
"""The narrowest KV dtype tune tries on each engine, one byte per element. SGLang names no
`fp8`: of its fp8_e5m2 and fp8_e4m3, e5m2 keeps the range of bf16 and so needs no scaling
factors from the checkpoint, where e4m3 without them stores at a scale of 1."""


def smaller_kv_dtype(engine: Engine) -> str:
    """The narrowest KV dtype tune tries on an engine (`SMALLER_KV_DTYPES`)."""
    return SMALLER_KV_DTYPES[engine]


@dataclass(frozen=True, slots=True)
class DtypeCapacity:
    """The cache at one KV dtype: bytes per token (None: unknown), tokens, sequences that fit."""

    kv_cache_dtype: str
    dtype_bytes: int
    bytes_per_token: int | None
    kv_tokens: int
    seqs_at_max_context: float | None
    seqs_at_load: float | None


@dataclass(frozen=True, slots=True)
class Capacity:
    """The replica's KV cache at each dtype, for requests of `load_tokens` (prompt + output)."""

    current_dtype: str
    block_size_tokens: int
    max_model_len_tokens: int | None
    load_tokens: int
    rows: tuple[DtypeCapacity, ...]
    notes: tuple[str, ...] = ()

    def at(self, kv_cache_dtype: str) -> DtypeCapacity | None:
        """The row of a dtype, matched by element width (fp8_e4m3 reads the fp8 row)."""
        width = dtype_bytes(kv_cache_dtype)
        named = [r for r in self.rows if r.kv_cache_dtype == kv_cache_dtype]
        if named:
            return named[0]
        same = [r for r in self.rows if r.dtype_bytes == width and r.kv_cache_dtype != "auto"]
        return same[0] if same else None

    def seqs_at_load(self, kv_cache_dtype: str) -> int | None:
        """Whole sequences of the load's length the cache holds at a dtype (None: unknown)."""
        row = self.at(kv_cache_dtype)
        if row is None or row.seqs_at_load is None:
            return None
        return math.floor(row.seqs_at_load)

    def words(self) -> list[str]:
        """The budget as lines: per dtype, bytes per token, tokens, sequences that fit."""
        lines = []
        for row in self.rows:
            per_token = f"{row.bytes_per_token:,} B/token" if row.bytes_per_token else "? B/token"
            at_max = (
                f"{row.seqs_at_max_context:.1f} at max context ({self.max_model_len_tokens:,})"
                if row.seqs_at_max_context is not None and self.max_model_len_tokens
                else "? at max context"
            )
            at_load = (
                f"{row.seqs_at_load:.1f} at the load's {self.load_tokens:,} tokens"
                if row.seqs_at_load is not None
                else ""
            )
            mark = " (now)" if row.kv_cache_dtype == self.current_dtype else ""
            lines.append(
                f"{row.kv_cache_dtype}{mark}: {per_token}, {row.kv_tokens:,} tokens; sequences: "
                + ", ".join(part for part in (at_max, at_load) if part)
            )
        return lines + [f"note: {note}" for note in self.notes]

    def to_json(self) -> dict[str, Any]:
        """The budget as JSON-ready data."""
        return {
            "current_dtype": self.current_dtype,
            "block_size_tokens": self.block_size_tokens,
            "max_model_len_tokens": self.max_model_len_tokens,
            "load_tokens": self.load_tokens,
            "rows": [
                {
                    "kv_cache_dtype": r.kv_cache_dtype,
                    "dtype_bytes": r.dtype_bytes,
                    "bytes_per_token": r.bytes_per_token,
                    "kv_tokens": r.kv_tokens,
                    "seqs_at_max_context": r.seqs_at_max_context,
                    "seqs_at_load": r.seqs_at_load,
                }
                for r in self.rows
            ],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capacity:
        """A budget back from `to_json`'s data (KeyError, TypeError or ValueError if it is not)."""
        return cls(
            current_dtype=str(data["current_dtype"]),
            block_size_tokens=int(data["block_size_tokens"]),
            max_model_len_tokens=_int_or_none(data.get("max_model_len_tokens")),
            load_tokens=int(data["load_tokens"]),
            rows=tuple(
                DtypeCapacity(
                    kv_cache_dtype=str(row["kv_cache_dtype"]),
                    dtype_bytes=int(row["dtype_bytes"]),
                    bytes_per_token=_int_or_none(row.get("bytes_per_token")),
                    kv_tokens=int(row["kv_tokens"]),
                    seqs_at_max_context=_float_or_none(row.get("seqs_at_max_context")),
                    seqs_at_load=_float_or_none(row.get("seqs_at_load")),
                )
                for row in data["rows"]
            ),
            notes=tuple(str(note) for note in data.get("notes") or ()),
        )


def _int_or_none(value: object) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _float_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def capacity_from_budget(budget: KvBudget, load_tokens: int) -> Capacity:
    """A tune's budget from `slotop budget`'s, sized with the load's request length as average."""
    return Capacity(
        current_dtype=budget.current_dtype or "auto",
        block_size_tokens=budget.block_size_tokens,
        max_model_len_tokens=budget.max_model_len_tokens,
        load_tokens=load_tokens,
        rows=tuple(
            DtypeCapacity(
                kv_cache_dtype=row.kv_cache_dtype,
                dtype_bytes=row.dtype_bytes,
                bytes_per_token=row.bytes_per_token,
                kv_tokens=row.kv_tokens,
                seqs_at_max_context=row.seqs_at_max_context,
                seqs_at_load=row.seqs_at_avg_len,
            )
            for row in budget.rows
        ),
        notes=budget.notes,
    )


def capacity_from_sglang(kv: KvCacheState, kv_cache_dtype: str, load_tokens: int) -> Capacity:
    """A tune's budget from an SGLang replica's own gauges: its pool in tokens
    (`max_total_num_tokens`) at the dtype it runs, and the sequences that fit at its context
    length and at the load's length. SGLang sizes its pool from memory, so no other dtype's row
    is predicted (a restart's verification reads what it chose); bytes per token are unknown."""
    tokens = kv.size_tokens or 0
    fits = kv.max_concurrency
    context = round(tokens / fits) if fits else None
    return Capacity(
        current_dtype=kv_cache_dtype,
        block_size_tokens=kv.block_size_tokens or 1,
        max_model_len_tokens=context,
        load_tokens=load_tokens,
        rows=(
            DtypeCapacity(
                kv_cache_dtype=kv_cache_dtype,
                dtype_bytes=dtype_bytes(kv_cache_dtype),
                bytes_per_token=None,
                kv_tokens=tokens,
                seqs_at_max_context=fits,
                seqs_at_load=tokens / load_tokens if load_tokens > 0 else None,
            ),
        ),
        notes=(
            "SGLang's pool in tokens (max_total_num_tokens), at the dtype it runs; SGLang sizes "
            "it from memory at start, so another dtype's is read after its restart, not predicted",
        ),
    )
