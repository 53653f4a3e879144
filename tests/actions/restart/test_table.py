"""The before/after table laid out for a width: what a panel 80 columns wide can hold."""

from __future__ import annotations

from slotop.actions.restart.compare import Change
from slotop.actions.restart.table import HEADER, ComparisonTable, TableRow, table_lines

# The rows the demo's panel showed after auto → fp8 at 3 in flight (cells as the table wrote them).
ROWS = (
    ("TTFT p50", "30.6 ms", "35.3 ms", "+4.7 ms", "±8.3", "×1.15", "within noise"),
    ("ITL p50", "6.7 ms", "6.7 ms", "+0.0 ms", "±0.0", "×1.00", "better"),
    (
        "output tokens",
        "420.8 tok/s",
        "433.4 tok/s",
        "+12.6 tok/s",
        "±20.7",
        "×1.03",
        "within noise",
    ),
    ("failed requests", "0", "0", "+0", "p 1.00", "N/A", "within noise"),
    ("KV blocks", "27,981", "55,962", "+27,981", "exact", "×2.00", "better"),
    ("seqs at max context", "3.4", "6.8", "+3.4", "exact", "×2.00", "better"),
    ("preemptions", "0", "1", "+1", "N/A", "N/A", "noise unknown"),
)
TABLE = ComparisonTable(
    ("before: as it ran", "after: restarted"),
    tuple(TableRow(cells, None) for cells in ROWS),
    (),
)
PANEL_80 = 74  # 80 columns less the border, the padding and the scrollbar


def test_a_panel_80_columns_wide_holds_each_row_on_one_line() -> None:
    lines = table_lines(TABLE, PANEL_80)
    assert max(len(line) for line in lines) <= PANEL_80
    assert lines[0].split() == [h for h in HEADER if h != "ratio"]
    # metric padded to 19, then each column right-aligned one blank apart, the verdict shortened
    assert lines[3] == "output tokens       420.8 tok/s 433.4 tok/s +12.6 tok/s  ±20.7 in noise"
    assert lines[7].endswith(" N/A unknown")
    assert lines[5].endswith(" exact better")


def test_the_verdicts_keep_their_words_where_the_table_fits() -> None:
    lines = table_lines(TABLE)
    assert lines[1].endswith("×1.15  within noise")
    assert lines[7].endswith("noise unknown")
    assert all(Change(line.split("  ")[-1].strip()) for line in lines[1:])
