"""Budgets from what a sizer already reported: the simulator's dry run, a replica's cache info.

A live replica's blocks are measured; at another dtype the same KV memory holds blocks scaled
by the ratio of element widths.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from slotop.actions.budget.kv import (
    TABLE_DTYPES,
    BudgetError,
    KvBudget,
    KvMemory,
    KvShape,
    auto_note,
    dtype_bytes,
    dtype_row,
    rows_from_elements,
    scaled_blocks,
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
        rows=rows_from_elements(
            elements, "bfloat16", kv_bytes, block_size, max_len, avg_len_tokens, dtypes
        ),
        notes=("weights and overheads are the simulator's estimates, not a measurement",),
    )


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
        rows.append(dtype_row(name, width, per_token, blocks, block_size, max_len, avg_len_tokens))
    if shape is not None and measured_per_token is not None:
        expected = shape.elements_per_token() * current
        if expected != measured_per_token:
            notes.append(
                f"the replica stores {measured_per_token} B/token but the config gives "
                f"{expected} B/token at {info.cache_dtype}: is it the same model and TP size?"
            )
    auto = auto_note(model_dtype) if "auto" in dtypes or info.cache_dtype == "auto" else None
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
