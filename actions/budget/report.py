"""A KV budget as plain text (a table that shows its formula) and as JSON-ready data."""

from __future__ import annotations

from dataclasses import asdict

from slotop import fmt
from slotop.actions.budget.kv import GIB, KvBudget

_SOURCES = {
    "config": "config.json and the GPU memory given",
    "simulator": "the simulator's tables",
    "replica": "the live replica's cache_config_info",
}
_HEADERS = ("kv dtype", "bytes", "B/token", "B/block", "blocks", "tokens", "seqs@max", "seqs@avg")


def _gib(value: int | None) -> str:
    if value is None:
        return fmt.NA
    if abs(value) < GIB:
        return f"{value / (1 << 20):.1f} MiB"
    return f"{value / GIB:.2f} GiB"


def _formula_lines(budget: KvBudget) -> list[str]:
    lines = []
    shape = budget.shape
    if shape is not None and shape.mla_latent_dim is not None:
        lines.append(
            f"  B/token per GPU = layers {shape.num_layers} × latent {shape.mla_latent_dim} "
            "× dtype bytes (latent attention: one latent per layer, on every rank)"
        )
    elif shape is not None:
        lines.append(
            f"  B/token per GPU = 2 (K,V) × layers {shape.num_layers} × kv_heads "
            f"{shape.kv_heads_per_gpu} ({shape.num_kv_heads} over TP {shape.tensor_parallel_size}) "
            f"× head_dim {shape.head_dim} × dtype bytes"
        )
    else:
        lines.append("  B/token per GPU = 2 (K,V) × layers × kv_heads × head_dim × dtype bytes")
    memory = budget.memory
    if memory is not None and memory.weights_bytes is not None and memory.gpu_memory_bytes:
        lines.append(
            f"  KV memory {_gib(memory.kv_cache_bytes)} = GPU {_gib(memory.gpu_memory_bytes)} "
            f"× utilisation {memory.gpu_memory_utilization:g} − weights "
            f"{_gib(memory.weights_bytes)} − overheads {_gib(memory.overhead_bytes)}"
        )
    elif memory is not None:
        lines.append(f"  KV memory {_gib(memory.kv_cache_bytes)}")
    lines.append(
        f"  blocks = KV memory // (B/token × block {budget.block_size_tokens}); "
        "seqs at a length = blocks / ceil(length / block)"
    )
    lengths = [f"block {budget.block_size_tokens} tokens"]
    if budget.max_model_len_tokens is not None:
        lengths.append(f"max context {budget.max_model_len_tokens:,} tokens")
    if budget.avg_len_tokens is not None:
        lengths.append(f"average length {budget.avg_len_tokens:,} tokens")
    lines.append("  " + " · ".join(lengths))
    return lines


def format_budget_text(budget: KvBudget) -> str:
    """The budget as a fixed-width table under the formula it was computed with."""
    title = "KV budget" + (f": {budget.model}" if budget.model else "")
    lines = [
        f"{title} (from {_SOURCES.get(budget.source, budget.source)})",
        *_formula_lines(budget),
    ]
    table = [_HEADERS]
    for row in budget.rows:
        name = row.kv_cache_dtype + (" *" if row.kv_cache_dtype == budget.current_dtype else "")
        table.append(
            (
                name,
                str(row.dtype_bytes),
                fmt.number(row.bytes_per_token),
                fmt.number(row.bytes_per_block),
                fmt.number(row.kv_blocks),
                fmt.number(row.kv_tokens),
                fmt.number(row.seqs_at_max_context, 1),
                fmt.number(row.seqs_at_avg_len, 1),
            )
        )
    widths = [max(len(cells[i]) for cells in table) for i in range(len(_HEADERS))]
    lines.append("")
    for cells in table:
        first = cells[0].ljust(widths[0])
        rest = "  ".join(
            cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)
        )
        lines.append(f"  {first}  {rest}")
    if budget.current_dtype is not None:
        lines.append("  * the dtype it runs (or is sized) at now")
    for note in budget.notes:
        lines.append(f"  note: {note}")
    return "\n".join(lines) + "\n"


def budget_to_json(budget: KvBudget) -> dict[str, object]:
    """The budget as JSON-ready data: inputs, every row, notes; null where unknown."""
    shape = budget.shape
    return {
        "source": budget.source,
        "model": budget.model,
        "shape": (
            None if shape is None else {**asdict(shape), "kv_heads_per_gpu": shape.kv_heads_per_gpu}
        ),
        "memory": None if budget.memory is None else asdict(budget.memory),
        "block_size_tokens": budget.block_size_tokens,
        "max_model_len_tokens": budget.max_model_len_tokens,
        "avg_len_tokens": budget.avg_len_tokens,
        "current_dtype": budget.current_dtype,
        "rows": [asdict(row) for row in budget.rows],
        "notes": list(budget.notes),
    }
