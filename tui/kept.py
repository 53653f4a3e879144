"""Widgets that hand the compositor their last lines again when none of them changed.

Each frame Textual's compositor asks every widget whose clip meets the frame's changed area for
all its lines, changed or not. In the dashboard's body that clip is the whole scrolling body, so
a number ticking in one pane made every pane and container below the header answer, each
working out its background colours, its region and its line filters first, and each taking its
kept lines one by one: 16 widgets and 206 lines a frame under load, of which a handful had
changed. Answering the others from what they last answered took about a fifth off the
compositor's time per frame (1.72 → 1.39 ms, a loaded frame replayed headless).

A widget here remembers what it answered. It answers the same list again, without asking
Textual, when the same area is asked for, the same line filters are on (they are applied after
the cache), and Textual's line cache for the widget holds exactly what it held then: no line
marked for repaint, the same number of lines kept and the first of them the same object.
Anything else that changes how the widget looks goes through that cache (a repaint of a line or
of the widget, a resize, a style or class change, a theme change clears it or marks it), so an
answer is never kept past a change. `tests/tui/test_screen_truth.py` checks the screen the terminal is sent
against a redraw from scratch after each kind of change.

Relies on Textual's line cache (`Widget._styles_cache`); Textual is pinned exactly for that. A
Textual class comes first in each subclass's bases: Textual takes a widget's default styles along
the first base only (a scrolling body without its scrollbar otherwise).
"""

from __future__ import annotations

from typing import Any

from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.filter import LineFilter
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widget import Widget

_Kept = tuple[Region, tuple[LineFilter, ...], Strip | None, int, list[Strip]]
"""An answer and what it was for: the area, the line filters, the cache's first line and its
size, then the lines."""


class KeptLines(Widget):
    """A widget that answers the compositor with its last lines while nothing in them changed."""

    _kept: _Kept | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        cache: Any = self._styles_cache
        lines: dict[int, Strip] = cache._cache
        filters = tuple(self.app.get_line_filters())
        kept = self._kept
        if (
            kept is not None
            and not cache._dirty_lines
            and kept[0] == crop
            and kept[1] == filters
            and kept[3] == len(lines)
            and kept[2] is lines.get(crop.y)
        ):
            return kept[4]
        strips = super().render_lines(crop)
        self._kept = (crop, filters, lines.get(crop.y), len(lines), strips)
        return strips


class Body(VerticalScroll, KeptLines):
    """The dashboard's scrolling body."""


class Row(Horizontal, KeptLines):
    """A row of panes (a column of them on a narrow terminal)."""


class Stack(Vertical, KeptLines):
    """Panes stacked inside a row."""


class KeptScreen(Screen[Any], KeptLines):
    """The dashboard's screen (its background, behind every pane)."""
