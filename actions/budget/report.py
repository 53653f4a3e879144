"""A KV budget as plain text (a table that shows its formula) and as JSON-ready data."""

from __future__ import annotations

from dataclasses import asdict

from slotop import fmt
from slotop.actions.budget.kv import GIB, KvBudget
from slotop.actions.budget.sglang import BASIS_WORDS

_SOURCES = {
    "config": "config.json and the GPU memory given",
    "simulator": "the simulator's tables",
    "replica": "the live replica's cache_config_info",
    "sglang": "the live SGLang server's /get_server_info",
}
_HEADERS = ("kv dtype", "bytes", "B/token", "B/block", "blocks", "tokens", "seqs@max", "seqs@avg")
_SGLANG_HEADERS = (
    "kv dtype",
    "bytes",
    "B/token",
    "B/page",
    "pages",
    "tokens",
    "seqs@ctx",
    "seqs@avg",
)


def _gib(value: int | None) -> str:
    if value is None:
        return fmt.NA
    if abs(value) < GIB:
        return f"{value / (1 << 20):.1f} MiB"
    return f"{value / GIB:.2f} GiB"


def _sglang_lines(budget: KvBudget) -> list[str]:
    """SGLang's arithmetic: a pool of tokens in pages, from memory, held at a cap."""
    page = budget.block_size_tokens
    lines = [
        f"  SGLang's pool: tokens = KV bytes // B/token, floored to pages of {page}, held at "
        "--max-total-tokens",
        "  other dtypes: the same bytes hold tokens × old bytes // new bytes; "
        "seqs = pages / ceil(length / page)",
    ]
    lines.append(_lengths_line(budget, "page", "context length"))
    return lines


def _lengths_line(budget: KvBudget, unit: str, context: str) -> str:
    """The lengths the table divides by: the block (or page), the context, the average."""
    lengths = [f"{unit} {budget.block_size_tokens} tokens"]
    if budget.max_model_len_tokens is not None:
        lengths.append(f"{context} {budget.max_model_len_tokens:,} tokens")
    if budget.avg_len_tokens is not None:
        lengths.append(f"average length {budget.avg_len_tokens:,} tokens")
    return "  " + " · ".join(lengths)


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
        lines.append(
            "  B/token per GPU = 2 (K,V) × layers × kv_heads × head_dim × dtype bytes"
            + (
                " (SGLang does not report it: give --config-json)"
                if budget.engine == "sglang"
                else ""
            )
        )
    memory = budget.memory
    if memory is not None and memory.weights_bytes is not None and memory.gpu_memory_bytes:
        lines.append(
            f"  KV memory {_gib(memory.kv_cache_bytes)} = GPU {_gib(memory.gpu_memory_bytes)} "
            f"× utilisation {memory.gpu_memory_utilization:g} − weights "
            f"{_gib(memory.weights_bytes)} − overheads {_gib(memory.overhead_bytes)}"
        )
    elif memory is not None:
        lines.append(f"  KV memory {_gib(memory.kv_cache_bytes)}")
    if budget.engine == "sglang":
        return lines + _sglang_lines(budget)
    lines.append(
        f"  blocks = KV memory // (B/token × block {budget.block_size_tokens}); "
        "seqs at a length = blocks / ceil(length / block)"
    )
    lines.append(_lengths_line(budget, "block", "max context"))
    return lines


def format_budget_text(budget: KvBudget) -> str:
    """The budget as a fixed-width table under the formula it was computed with."""
    title = "KV budget" + (f": {budget.model}" if budget.model else "")
    lines = [
        f"{title} (from {_SOURCES.get(budget.source, budget.source)})",
        *_formula_lines(budget),
    ]
    sglang = budget.engine == "sglang"
    headers: tuple[str, ...] = _SGLANG_HEADERS if sglang else _HEADERS
    basis = any(row.basis is not None for row in budget.rows)
    if basis:
        headers = (*headers, "basis")
    table = [headers]
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
                *((row.basis or fmt.NA,) if basis else ()),
            )
        )
    widths = [max(len(cells[i]) for cells in table) for i in range(len(headers))]
    lines.append("")
    for cells in table:
        first = cells[0].ljust(widths[0])
        numbers = cells[1:-1] if basis else cells[1:]
        rest = "  ".join(
            cell.rjust(width) for cell, width in zip(numbers, widths[1:], strict=False)
        )
        tail = f"  {cells[-1]}" if basis else ""
        lines.append(f"  {first}  {rest}{tail}".rstrip())
    if budget.current_dtype is not None:
        lines.append("  * the dtype it runs (or is sized) at now")
    if basis:
        kinds = dict.fromkeys(row.basis for row in budget.rows if row.basis is not None)
        for kind in kinds:
            lines.append(f"  {kind}: {BASIS_WORDS.get(kind, kind)}")
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
        "engine": budget.engine,
        "current_dtype": budget.current_dtype,
        "rows": [asdict(row) for row in budget.rows],
        "notes": list(budget.notes),
    }
