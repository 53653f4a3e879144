"""What reaches the terminal: nothing for an unchanged snapshot, one line for one moved number.

Each test records the updates the screen hands to the terminal (the rows and columns of each) and
how many times each pane drew its view, around one message, at 160×50, in both drawing modes
(tui/textual_internals.py's tricks on, and Textual's own way): what is sent does not depend on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from rich.text import Text
from textual._compositor import ChopsUpdate
from textual.app import App, ComposeResult

from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.messages import LatencyTrend, SnapshotCollected
from slotop.tui.panes.base import Pane
from slotop.tui.panes.header import HeaderPane
from slotop.tui.panes.kv import KvPane
from tests.support.pilot import wait_until
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh, with_load

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("render_mode")]

SNAPSHOT = capture_snapshot()
TREND = LatencyTrend(
    times_s=(FROZEN_NOW_S - 2, FROZEN_NOW_S - 1, FROZEN_NOW_S),
    ttft_p50_s=(0.05, 0.06, 0.05),
    ttft_p90_s=(0.08, 0.09, 0.08),
    ttft_p99_s=(0.2, 0.6, 0.3),
    itl_p50_s=(0.01, 0.01, 0.012),
    itl_p90_s=(0.02, 0.02, 0.02),
    itl_p99_s=(0.03, 0.04, 0.03),
)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = FROZEN_NOW_S

    def __call__(self) -> float:
        return self.now_s


@dataclasses.dataclass
class Sent:
    """The screen updates sent to the terminal while recording, and the panes' draws."""

    spans: list[tuple[int, int, int]] = dataclasses.field(default_factory=list)
    whole_screens: int = 0
    draws: int = 0

    @property
    def rows(self) -> set[int]:
        return {y for y, _, _ in self.spans}


@contextmanager
def sent_to_terminal(app: App[Any]) -> Iterator[Sent]:
    """Record what the app sends to the terminal (headless, it is built all the same)."""
    sent = Sent()
    display = app._display
    draws_before = sum(pane.frames for pane in app.query(Pane))

    def recording(screen: Any, renderable: Any) -> None:
        if isinstance(renderable, ChopsUpdate):
            sent.spans.extend(renderable.spans)
        elif renderable is not None:
            sent.whole_screens += 1
        display(screen, renderable)

    app._display = recording  # type: ignore[method-assign]
    try:
        yield sent
    finally:
        app._display = display  # type: ignore[method-assign]
        sent.draws = sum(pane.frames for pane in app.query(Pane)) - draws_before


async def _post(app: SlotopApp, pilot: Any, snapshot: Any, at_s: float) -> None:
    app.post_message(SnapshotCollected(fresh(snapshot, at_s), TREND))
    await pilot.pause()
    await pilot.pause()


def _frames(app: SlotopApp) -> int:
    return sum(pane.frames for pane in app.query(Pane))


async def _painted(app: SlotopApp, pilot: Any, snapshot: Any, at_s: float) -> None:
    """Post the first snapshot and let the app paint all of it: its panes drew it, then drew
    nothing more over two pauses. On a busy machine the first paint comes later than two
    pauses, and a measurement begun before it counts the whole first screen."""
    before = _frames(app)
    app.post_message(SnapshotCollected(fresh(snapshot, at_s), TREND))
    await wait_until(pilot, lambda: _frames(app) > before, 10.0, step_s=0.02)
    steady = -1
    while _frames(app) != steady:
        steady = _frames(app)
        await pilot.pause(0.05)
        await pilot.pause(0.05)


async def test_an_unchanged_snapshot_a_second_later_sends_nothing() -> None:
    clock = Clock()
    app = SlotopApp(Settings(), clock=clock)
    async with app.run_test(size=(160, 50)) as pilot:
        await _painted(app, pilot, SNAPSHOT, clock.now_s)
        with sent_to_terminal(app) as sent:
            clock.now_s += 1.0
            app._tick()  # the once-a-second tick: the header's words did not change
            await _post(app, pilot, SNAPSHOT, clock.now_s)
        assert sent.spans == [] and sent.whole_screens == 0
        assert sent.draws == 0


async def test_a_snapshot_handled_after_a_pane_left_its_screen_draws_nothing_there() -> None:
    """As the app closes, Textual takes the screens down and then handles the messages still
    queued: a snapshot the feed posted a moment before reaches panes no longer on any screen."""
    clock = Clock()
    app = SlotopApp(Settings(), clock=clock)
    async with app.run_test(size=(160, 50)) as pilot:
        await _painted(app, pilot, SNAPSHOT, clock.now_s)
        kv = app.query_one(KvPane)
        await kv.remove()
        frames, view = kv.frames, kv.view
        # handing the pane its new view raised NoScreen here before
        await _post(app, pilot, with_load(SNAPSHOT, usage=0.5), clock.now_s + 1.0)
        assert kv.view is app.views.kv and kv.view != view  # it has the new view
        assert kv.frames == frames  # and drew nothing


async def test_one_moved_number_sends_its_line_up_to_where_it_moved() -> None:
    clock = Clock()
    app = SlotopApp(Settings(), clock=clock)

    def waiting(count: float) -> Any:
        requests = dataclasses.replace(SNAPSHOT.requests, running=8.0, waiting=count)
        return dataclasses.replace(SNAPSHOT, requests=requests)

    async with app.run_test(size=(160, 50)) as pilot:
        await _painted(app, pilot, waiting(3.0), clock.now_s)
        kv = app.query_one(KvPane)
        rows = kv.render().plain.split("\n")
        queue_line = next(i for i, row in enumerate(rows) if "running 8  waiting 3" in row)
        with sent_to_terminal(app) as sent:
            await _post(app, pilot, waiting(4.0), clock.now_s)
        shown = kv.render().plain.split("\n")[queue_line]
        assert "running 8  waiting 4" in shown
        inside = kv.content_region
        assert {y for y in sent.rows if inside.y <= y < inside.bottom} == {inside.y + queue_line}
        # Sent from the pane's left edge to the moved digit, not the rest of its line.
        moved_to = inside.x + shown.index("waiting 4") + len("waiting 4")
        assert [x2 for y, _, x2 in sent.spans if y == inside.y + queue_line] == [moved_to]
        assert sent.whole_screens == 0


async def test_the_tick_sends_the_header_line_whose_words_changed_and_nothing_else() -> None:
    clock = Clock()
    app = SlotopApp(Settings(), clock=clock)
    async with app.run_test(size=(160, 50)) as pilot:
        clock.now_s += 59.5
        await _painted(app, pilot, SNAPSHOT, clock.now_s)
        header = app.query_one(HeaderPane)
        assert "attached <1m" in header.render().plain
        with sent_to_terminal(app) as sent:
            clock.now_s += 1.0
            app._tick()
            await pilot.pause()
        assert "attached 1m" in header.render().plain
        inside = header.content_region
        assert sent.rows == {inside.y + 1}  # the second of its two lines says how long attached
        assert sent.draws == 1


class _Lines(Pane):
    """A pane that draws its view, a tuple of strings, a line each."""

    def draw(self, view: tuple[str, ...]) -> Text:
        return Text("\n".join(view))


class _TwoPanes(App[None]):
    CSS = "_Lines { height: auto; border: round white; }"

    def compose(self) -> ComposeResult:
        yield _Lines(id="top")
        yield _Lines(id="below")


async def test_a_pane_keeps_its_height_when_its_text_gets_shorter_and_grows_when_taller() -> None:
    app = _TwoPanes()
    async with app.run_test(size=(40, 20)) as pilot:
        top, below = app.query_one("#top", _Lines), app.query_one("#below", _Lines)
        top.view, below.view = ("one", "two", "three"), ("under",)
        await pilot.pause()
        assert top.size.height == 3
        with sent_to_terminal(app) as sent:
            top.view = ("one", "two")
            await pilot.pause()
        assert top.size.height == 3  # kept: the pane below does not move
        inside = top.content_region
        assert sent.rows == {inside.y + 2} and sent.whole_screens == 0  # the third line blanked
        assert app.screen.get_widget_at(inside.x, below.content_region.y)[0] is below
        top.view = ("one", "two", "three", "four")
        await pilot.pause()
        assert top.size.height == 4  # taller than ever: the layout makes room
