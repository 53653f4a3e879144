"""The before/after panel at 80×24: each row on one line, a shortened verdict still coloured."""

from __future__ import annotations

import pytest

from slotop.actions.restart.compare import Change
from slotop.actions.restart.table import ComparisonTable, TableRow
from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.panes.change import ChangePane
from slotop.tui.views.change import ChangeView

pytestmark = pytest.mark.anyio

TABLE = ComparisonTable(
    ("before: as it ran", "after: restarted"),
    (
        TableRow(
            (
                "output tokens",
                "420.8 tok/s",
                "433.4 tok/s",
                "+12.6 tok/s",
                "±20.7",
                "×1.03",
                "within noise",
            ),
            Change.WITHIN_NOISE,
        ),
        TableRow(
            ("seqs at max context", "3.4", "6.8", "+3.4", "exact", "×2.00", "better"), Change.BETTER
        ),
        TableRow(
            ("preemptions", "0", "1", "+1", "N/A", "N/A", "noise unknown"), Change.NOISE_UNKNOWN
        ),
    ),
    (),
)


async def test_the_panel_at_80_columns_keeps_rows_whole_and_colours_a_short_verdict() -> None:
    app = SlotopApp(Settings(), clock=lambda: 1000.0)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = app.query_one(ChangePane)
        pane.view = ChangeView(
            "kv_cache_dtype auto → fp8, at 3 in flight", "", False, TABLE.sides, TABLE
        )
        await pilot.pause()
        text = pane.render()
        rows = text.plain.split("\n")
        assert pane.content_size.width < 76  # too narrow for the table's own words
        assert max(len(row) for row in rows) <= pane.content_size.width
        unknown = next(row for row in rows if row.startswith("preemptions"))
        assert unknown.endswith(" unknown")
        start = text.plain.index(unknown) + len(unknown) - len("unknown")
        styles = [str(span.style) for span in text.spans if span.start == start]
        assert styles == ["yellow"]
