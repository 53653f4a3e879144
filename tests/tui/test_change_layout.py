"""The before/after panel's place on screen: at 160×50 every pane stays in view with it (the body
does not scroll), at 80×24 its headline, what moved beyond the noise, shows without scrolling."""

from __future__ import annotations

import pytest
from textual.containers import VerticalScroll

from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.messages import LatencyTrend, SnapshotCollected
from slotop.tui.panes.base import Pane
from slotop.tui.panes.change import ChangePane
from slotop.tui.panes.events import EventsPane
from tests.support.change_table import DEMO_BEFORE_AFTER
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh

pytestmark = pytest.mark.anyio

HEADLINE = (
    "beyond the run-to-run noise: better ITL p50, output tokens, KV blocks, KV tokens, "
    "seqs at max context · 9 within noise"
)
"""Worked from the table: five rows better, none worse, the other nine within their noise."""


async def _shown(app: SlotopApp, pilot: object) -> ChangePane:
    app.post_message(SnapshotCollected(fresh(capture_snapshot()), LatencyTrend()))
    await pilot.pause()  # type: ignore[attr-defined]
    app.update_inputs(before_after=DEMO_BEFORE_AFTER)
    await pilot.pause()  # type: ignore[attr-defined]
    return app.query_one(ChangePane)


async def test_at_160_by_50_every_pane_stays_on_screen_beside_the_panel() -> None:
    app = SlotopApp(Settings(), clock=lambda: FROZEN_NOW_S)
    async with app.run_test(size=(160, 50)) as pilot:
        pane = await _shown(app, pilot)
        body = app.query_one("#body", VerticalScroll)
        assert pane.display and body.max_scroll_y == 0  # nothing below the fold
        for each in app.query(Pane):
            if each.display:
                region = each.region
                assert region.height > 0 and region.bottom <= body.region.bottom, each.id
        assert app.query_one(EventsPane).region.height >= 4  # two lines of the timeline
        # the 14 rows in two columns of 7 under their headers: 8 lines, the headline and the
        # sides' spans (side by side) above them and a line per note below, between the borders
        assert pane.region.height == 2 + 1 + 1 + 8 + 2
        shown = pane.render().plain.split("\n")
        assert shown[0] == HEADLINE
        assert shown[1].startswith("before: 61 requests over 13.1 s, 41.3 s into its load")
        assert (
            " │ after: 58 requests over 12.6 s, 2.2 s into its load (settled after 2.2 s)"
            in shown[1]
        )
        assert len(shown[1]) <= pane.content_size.width
        assert shown[2].count("metric") == 2
        assert (
            shown[3].startswith("TTFT p50 ") and " │ goodput (share) " in shown[3]
        )  # rows 1 and 8 of 14
        assert "kv_cache_dtype auto → fp8, at 2 in flight" in str(pane.border_title)


async def test_without_the_panel_the_timeline_takes_the_rows_left() -> None:
    app = SlotopApp(Settings(), clock=lambda: FROZEN_NOW_S)
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(SnapshotCollected(fresh(capture_snapshot()), LatencyTrend()))
        await pilot.pause()
        body = app.query_one("#body", VerticalScroll)
        events = app.query_one(EventsPane)
        assert events.region.bottom == body.region.bottom  # no blank rows under it


async def test_at_80_by_24_the_headline_shows_without_scrolling() -> None:
    app = SlotopApp(Settings(), clock=lambda: FROZEN_NOW_S)
    async with app.run_test(size=(80, 24)) as pilot:
        pane = await _shown(app, pilot)
        body = app.query_one("#body", VerticalScroll)
        assert body.scroll_y == 0
        # the panel opens the body (under the header's 2 lines and the diagnosis line): its
        # border on line 3, the headline's 118 characters wrapped in 74 columns on lines 4 and 5
        assert pane.region.y == body.region.y == 3 and pane.content_size.width == 74
        assert pane.render().plain.split("\n")[0] == HEADLINE
        assert body.region.bottom > 5
