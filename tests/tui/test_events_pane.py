"""The events pane keeps the newest entry in sight when entries wrap to several lines."""

from __future__ import annotations

import pytest

from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.messages import TimelineEvent, TimelineNoted
from slotop.tui.panes.events import EventsPane

pytestmark = pytest.mark.anyio

LONG = "before/after at 4 in flight: " + ", ".join(["TTFT p50 worse"] * 8)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_the_newest_entry_shows_below_entries_that_wrap(size: tuple[int, int]) -> None:
    app = SlotopApp(Settings(), clock=lambda: 1000.0)
    async with app.run_test(size=size) as pilot:
        for index in range(3):
            app.post_message(TimelineNoted(TimelineEvent(990.0 + index, "restart", LONG)))
        app.post_message(TimelineNoted(TimelineEvent(999.0, "load", "the newest entry")))
        await pilot.pause()
        pane = app.query_one(EventsPane)
        shown = [pane.render_line(y).text for y in range(pane.size.height)]
        assert any("the newest entry" in row for row in shown), shown
        assert any("TTFT p50 worse" in row for row in shown), shown  # the room is used
