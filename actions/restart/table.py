"""The before/after table as cells, as fixed-width text and as JSON: one set of words for all.

`comparison_table` turns a comparison into cells (the values in their units, the delta, its noise,
the ratio, the verdict); `table_lines` lays them out in columns, dropping the ratio column and
narrowing the gaps where a width asks for it. `slotop restart` prints these lines; the dashboard's
panel draws the same lines, coloured by each row's verdict. A recording keeps the cells
(`table_to_json`), so a report and a replay show the same words without the requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from slotop import fmt
from slotop.actions.restart.compare import Change, Comparison, ComparisonRow, RunSide
from slotop.actions.restart.noise import BATCH_CYCLES, COUNTS_ALPHA, Noise, NoiseMethod

HEADER = ("metric", "before", "after", "delta", "noise", "ratio", "verdict")
RATIO_COLUMN = 5
LEGEND = (
    "better / worse: the delta is beyond the run-to-run noise, a 95% band from each side's "
    f"batches (stretches of {BATCH_CYCLES:g}+ request",
    "  lifetimes): a bootstrap over them for percentiles and the goodput share, their spread for "
    "rates, Student's t for so few,",
    "  never under 1% of the before value;",
    f"  p: the exact Poisson test of counts (beyond under {COUNTS_ALPHA:g}); KV capacity is exact",
)


@dataclass(frozen=True, slots=True)
class TableRow:
    """One row's cells, in `HEADER` order, and its verdict (for colour)."""

    cells: tuple[str, ...]
    verdict: Change | None


@dataclass(frozen=True, slots=True)
class ComparisonTable:
    """A before/after table in words: who each side is, the rows, and the lines under them."""

    sides: tuple[str, str]
    rows: tuple[TableRow, ...]
    footer: tuple[str, ...]


def format_value(value: float | None, unit: str) -> str:
    """A value in its unit for the table: seconds as ms, ratios as percent, counts whole."""
    if unit == "s":
        return fmt.millis(value, ",.1f", " ms")
    if unit == "ratio":
        return fmt.percent(value)
    if unit in ("count", "blocks", "tokens"):
        return fmt.number(value)
    if unit == "seqs":
        return fmt.number(value, 1)
    return fmt.number(value, 2 if unit in ("req/s", "/s") else 1, f" {unit}")


def _magnitude(value: float, unit: str) -> str:
    if unit == "ratio":
        return f"{value * 100:.1f} pt"
    return format_value(value, unit)


def _format_delta(row: ComparisonRow) -> str:
    if row.delta is None:
        return fmt.NA
    magnitude = _magnitude(abs(row.delta), row.unit)
    shown_zero = not any(c in "123456789" for c in magnitude)
    return ("+" if row.delta >= 0 or shown_zero else "−") + magnitude


def format_noise(noise: Noise, unit: str) -> str:
    """A row's noise: ± the half-width in the delta's unit (shown beside it, so not repeated), p of
    the counts test, or exact."""
    if noise.method is NoiseMethod.EXACT:
        return "exact"
    if noise.method is NoiseMethod.COUNTS:
        return fmt.NA if noise.p_value is None else f"p {noise.p_value:.2f}"
    if noise.half_width is None:
        return fmt.NA
    if unit == "ratio":
        return f"±{noise.half_width * 100:.1f}"
    if unit == "s":
        return "±" + fmt.millis(noise.half_width, ",.1f")
    return "±" + fmt.number(noise.half_width, 2 if unit in ("req/s", "/s") else 1)


def _flags(side: RunSide) -> str:
    return " ".join(f"{k}={v}" for k, v in side.flags)


def _side_words(name: str, side: RunSide) -> str:
    """A side's line: its label and dials, then what it spans where known."""
    words = f"{name} {side.label} {_flags(side)}".rstrip()
    return f"{words}; {side.span.words()}" if side.span is not None else words


def comparison_table(comparison: Comparison) -> ComparisonTable:
    """The comparison in words: one row of cells per metric, the legend and the notes below."""
    before, after = comparison.before, comparison.after
    rows = tuple(
        TableRow(
            (
                row.label,
                format_value(row.before, row.unit),
                format_value(row.after, row.unit),
                _format_delta(row),
                format_noise(row.noise, row.unit) if row.delta is not None else "",
                fmt.NA if row.ratio is None else f"×{row.ratio:.2f}",
                row.verdict.value if row.verdict is not None else "",
            ),
            row.verdict,
        )
        for row in comparison.rows
    )
    return ComparisonTable(
        (_side_words("before:", before), _side_words("after: ", after)),
        rows,
        (*LEGEND, *(f"note: {note}" for note in comparison.notes)),
    )


SHORT_VERDICTS = {Change.WITHIN_NOISE.value: "in noise", Change.NOISE_UNKNOWN.value: "unknown"}
"""The verdicts' shorter words, for a panel too narrow for the table's own (80 columns)."""


def table_lines(table: ComparisonTable, width: int | None = None) -> tuple[str, ...]:
    """The header and one line per row, in columns; within `width` where it can be met by
    dropping the ratio column, then narrowing the gaps, then shortening the verdicts
    (`SHORT_VERDICTS`) (None: every column, wide gaps)."""
    layouts = [(True, 2, False), (False, 2, False), (False, 1, False), (False, 1, True)]
    lines: tuple[str, ...] = ()
    for with_ratio, gap, short in layouts:
        lines = _lay_out(table, with_ratio, gap, short)
        if width is None or max(len(line) for line in lines) <= width:
            return lines
    return lines


def _lay_out(table: ComparisonTable, with_ratio: bool, gap: int, short: bool) -> tuple[str, ...]:
    keep = [i for i in range(len(HEADER)) if with_ratio or i != RATIO_COLUMN]
    grid = [[HEADER[i] for i in keep], *([row.cells[i] for i in keep] for row in table.rows)]
    if short:
        grid = [[*cells[:-1], SHORT_VERDICTS.get(cells[-1], cells[-1])] for cells in grid]
    widths = [max(len(cells[i]) for cells in grid) for i in range(len(keep))]
    space = " " * gap
    lines = []
    for cells in grid:
        first = cells[0].ljust(widths[0])
        numbers = space.join(c.rjust(w) for c, w in zip(cells[1:-1], widths[1:-1], strict=True))
        lines.append(f"{first}{space}{numbers}{space}{cells[-1]}".rstrip())
    return tuple(lines)


def table_text(table: ComparisonTable) -> str:
    """The table as fixed-width text: who each side is, the rows, the legend and the notes."""
    lines = [*table.sides, ""]
    lines += [f"  {line}" for line in table_lines(table)]
    lines += [f"  {line}" for line in table.footer]
    return "\n".join(lines) + "\n"


def format_comparison_text(comparison: Comparison) -> str:
    """The comparison's table as fixed-width text (`table_text`), as `slotop restart` prints it."""
    return table_text(comparison_table(comparison))


def table_to_json(table: ComparisonTable) -> dict[str, object]:
    """The table in its words, as a recording keeps it: the header, the sides, each row's cells
    (the verdict last) and the lines under them."""
    return {
        "header": list(HEADER),
        "sides": list(table.sides),
        "rows": [list(row.cells) for row in table.rows],
        "footer": list(table.footer),
    }


def table_from_json(data: Mapping[str, Any]) -> ComparisonTable:
    """A table `table_to_json` wrote, each row's verdict read back from its last cell."""
    verdicts = {change.value: change for change in Change}
    sides = tuple(str(side) for side in data.get("sides") or ())
    rows = []
    for row in data.get("rows") or ():
        cells = tuple(str(cell) for cell in row)
        if len(cells) != len(HEADER):
            raise ValueError(f"a before/after row holds {len(cells)} cells; expected {len(HEADER)}")
        rows.append(TableRow(cells, verdicts.get(cells[-1])))
    if len(sides) != 2:
        raise ValueError(f"a before/after table names {len(sides)} sides; expected 2")
    return ComparisonTable(
        (sides[0], sides[1]), tuple(rows), tuple(str(line) for line in data.get("footer") or ())
    )


def comparison_to_json(comparison: Comparison) -> dict[str, object]:
    """The table as JSON-ready data: each side's label and dials, every row, the notes."""

    def side(run: RunSide) -> dict[str, object]:
        span = asdict(run.span) if run.span is not None else None
        return {"label": run.label, "flags": dict(run.flags), "span": span}

    rows = []
    for row in comparison.rows:
        data = asdict(row)
        data["better"] = row.better.value
        data["verdict"] = row.verdict.value if row.verdict is not None else None
        data["noise"] = {
            "method": row.noise.method.value,
            "half_width": row.noise.half_width,
            "p_value": row.noise.p_value,
            "unknown": row.noise.unknown or None,
            "between_starts": row.noise.between_starts,
        }
        rows.append(data)
    return {
        "before": side(comparison.before),
        "after": side(comparison.after),
        "rows": rows,
        "notes": list(comparison.notes),
    }
