"""The screen the terminal is sent, change by change, equals the screen drawn from scratch.

The dashboard sends a terminal only what changed: a pane redraws only its changed rows and marks
only its changed lines, and where tui/textual_internals.py's tricks are on, a row that fits its
line is drawn the short way (`fitted_row`) and a widget whose lines did not change hands the
compositor its last answer again (`KeptLines`). Each saving is right only if nothing that changes
the look slips past it. So this test keeps a terminal of its own, fed every update the app sends
(cursor moves and the cells after them, as a terminal takes them), and after each kind of change
compares every cell, character and style, with the whole screen drawn again with every cache
emptied and every row drawn by Textual's own renderer: moving numbers, a stale poll (the header's
and the SLO pane's state classes), a breach (the SLO pane's border), a theme change, the help
screen opened and closed, a resize and a scroll. It runs with the tricks on and with them off.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from rich.segment import ControlType, Segment
from rich.style import Style
from textual._compositor import CompositorUpdate

from slotop.config import Settings
from slotop.tui import textual_internals
from slotop.tui.app import SlotopApp
from slotop.tui.messages import LatencyTrend, SnapshotCollected
from slotop.tui.panes.base import Pane
from slotop.tui.textual_internals import KeptLines
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh, stale, with_load

pytestmark = pytest.mark.anyio

SNAPSHOT = capture_snapshot()
Cell = tuple[str, Style | None]


class Terminal:
    """A grid of cells that takes what the app writes: cursor moves, then text at the cursor."""

    def __init__(self, width: int, height: int) -> None:
        self.resize(width, height)

    def resize(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.cells: list[list[Cell]] = [[(" ", None)] * width for _ in range(height)]

    def take(self, segments: Any) -> None:
        x = y = 0
        for segment in segments:
            text, style, control = segment
            if control:
                for code in control:
                    if code[0] is ControlType.CURSOR_MOVE_TO:
                        x, y = code[1], code[2]
                continue
            if text == "\n":
                x, y = 0, y + 1
                continue
            for character in Segment(text, style).text:
                if 0 <= y < self.height and 0 <= x < self.width:
                    self.cells[y][x] = (character, style)
                x += 1


def _drawn_from_scratch(app: SlotopApp) -> list[list[Cell]]:
    """Every cell of the screen drawn again with every cache of every widget emptied, Textual's
    own way (no kept lines, no row drawn the short way)."""
    screen = app.screen
    for widget in screen.walk_children(with_self=True):
        widget._styles_cache.clear()
        if isinstance(widget, KeptLines):
            widget._kept = None
        if isinstance(widget, Pane):
            widget._drawn_for = None
    rows: list[list[Cell]] = []
    with textual_internals.using(textual_internals.PLAIN):
        strips = screen._compositor.render_strips()
    for strip in strips:
        row: list[Cell] = []
        for text, style, _ in strip:
            row.extend((character, style) for character in text)
        rows.append(row)
    return rows


def _differences(sent: Terminal, truth: list[list[Cell]]) -> list[str]:
    found = []
    for y, (shown, drawn) in enumerate(zip(sent.cells, truth, strict=True)):
        for x, (a, b) in enumerate(zip(shown, drawn, strict=True)):
            if a != b:
                found.append(f"row {y} col {x}: sent {a[0]!r} {a[1]!r}, drawn {b[0]!r} {b[1]!r}")
    return found


def _trend(step: int) -> LatencyTrend:
    times = tuple(FROZEN_NOW_S - 60 + step + i for i in range(60))
    wave = tuple(0.05 + 0.01 * ((step + i) % 7) for i in range(60))
    return LatencyTrend(times, wave, wave, wave, wave, wave, wave)


async def test_what_the_terminal_is_sent_equals_the_screen_drawn_from_scratch(
    render_mode: str,
) -> None:
    app = SlotopApp(Settings())
    term = Terminal(160, 50)
    display = app._display

    def sent(screen: Any, renderable: Any) -> None:
        if isinstance(renderable, CompositorUpdate) and screen is app.screen:
            term.take(renderable.__rich_console__(app.console, app.console.options))
        display(screen, renderable)

    app._display = sent  # type: ignore[method-assign]

    async with app.run_test(size=(160, 50)) as pilot:

        async def check(what: str) -> None:
            await pilot.pause()
            await pilot.pause()
            wrong = _differences(term, _drawn_from_scratch(app))
            assert not wrong, f"after {what}: " + "\n".join(wrong[:10])

        await check("the first paint")
        for step in range(1, 6):
            loaded = with_load(SNAPSHOT, running=4 + step, waiting=step % 2, usage=0.1 * step)
            app.post_message(SnapshotCollected(fresh(loaded, FROZEN_NOW_S + step), _trend(step)))
            await check(f"moving numbers, step {step}")

        app.post_message(SnapshotCollected(stale(SNAPSHOT, "refused"), _trend(6)))
        await check("a stale poll")
        app.post_message(SnapshotCollected(fresh(SNAPSHOT, FROZEN_NOW_S + 7), _trend(7)))
        await check("fresh again")

        ttft = SNAPSHOT.window.ttft_s
        slow = dataclasses.replace(
            ttft,
            percentiles=tuple(
                (p, None if e is None else dataclasses.replace(e, value=e.value * 100))
                for p, e in ttft.percentiles
            ),
        )
        breach = dataclasses.replace(
            SNAPSHOT, window=dataclasses.replace(SNAPSHOT.window, ttft_s=slow)
        )
        app.post_message(SnapshotCollected(fresh(breach, FROZEN_NOW_S + 8), _trend(8)))
        await check("a breach")

        app.theme = "textual-light"
        await check("a theme change")

        await pilot.press("question_mark")
        await pilot.pause()
        await pilot.press("escape")
        await check("the help opened and closed")

        term.resize(120, 40)  # a terminal resized is blank until the app draws it again
        await pilot.resize_terminal(120, 40)
        await check("a resize to 120×40")
        app.post_message(SnapshotCollected(fresh(SNAPSHOT, FROZEN_NOW_S + 9), _trend(9)))
        await check("moving numbers at 120×40")
        body = app.query_one("#body")
        body.scroll_to(y=12, animate=False)  # one column of panes: it scrolls
        await check("the body scrolled")
        assert body.scroll_y == 12
        app.post_message(SnapshotCollected(fresh(SNAPSHOT, FROZEN_NOW_S + 10), _trend(10)))
        await check("moving numbers, scrolled")
