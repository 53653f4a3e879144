"""The base of every pane: one view, set from above, drawn into lines that repaint only where they moved.

What a new pane gets for free by subclassing `Pane` and writing `draw(view) -> Text`:

- An equal view costs nothing: the reactive compares it and stops there, so nothing is drawn,
  marked or sent to the terminal.
- A new view is drawn once into screen lines (the cells and styles Textual's own renderer gives
  the same text, so a pane looks as any widget showing it would: a row that fits its line is
  drawn straight into them where `fitted_row` is on, any other by the renderer, row by row),
  compared with the lines on screen, and only the lines that differ are marked for repaint,
  each up to its last changed cell: a ticking number costs its own line, not its pane, and a
  pane whose text did not change sends nothing.
- The lines are kept: the compositor asks for them (`render_line`) only where marked, and they
  are drawn again only when the view, the pane's size or its style (a state class, the theme)
  changed. While none changed, a frame asking for the whole pane gets its last answer again
  (`KeptLines`). Both short ways reach into Textual's internals and live in
  tui/textual_internals.py, each with a way back to Textual's own path.
- A pane as tall as its text (height: auto) keeps the most lines it has drawn at its width: a
  taller text asks for a layout, a shorter one blanks its last lines in place, so a line that
  wraps one second and not the next does not move every pane below it each time.

So a pane never calls `refresh()` and never overrides `render`, `render_line`, `render_lines` or
`watch_view`; `draw` may read `self.size` (drawn again on resize) and must not read a clock: what
moves with time belongs in the view, built once a second or once a scrape outside the render path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from rich.cells import get_character_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.reactive import Reactive, var
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.visual import Visual, visualize

from slotop.tui.textual_internals import KeptLines, fitted_row


class DrawKey(NamedTuple):
    """What a pane's lines were drawn for besides its view: its size, style and text selection."""

    size: Size
    style: VisualStyle
    selection: object


RowKey = tuple[object, ...]
"""A row of a pane's text, as what decides how it draws: its characters, spans and settings."""


class Pane(KeptLines):
    """A pane that shows `view`; an equal view repaints nothing, a new one only its changed lines."""

    TITLE: ClassVar[str] = ""
    view: var[Any] = var(None)
    auto_links: Reactive[bool] = Reactive(False)  # panes hold no links: no link style to apply
    frames: int = 0
    """How many times the pane drew its view into lines (a test's measure of work done)."""
    _lines: Sequence[Strip] = ()
    _rows: Mapping[RowKey, list[Strip]] = MappingProxyType({})
    _drawn_for: DrawKey | None = None
    _tallest: int = 0
    _tallest_width: int = -1

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def watch_view(self, view: Any) -> None:
        self.show_state(view)
        if not self.is_attached:  # off its screen (the app closing): nothing to draw into
            self._drawn_for = None  # should it be mounted again, it draws this view then
            return
        key = self._draw_key()
        if self._drawn_for is None or key != self._drawn_for or key.size.area == 0:
            self._drawn_for = None
            self.refresh(layout=True)  # not drawn yet, or drawn for another size: all of it
            return
        before, tallest = self._lines, self._tallest
        self._draw(key)
        after = self._lines
        if len(after) > tallest and self._sized_by_text():
            self.refresh(layout=True)  # it needs more room than it has ever had at this width
            return
        moved: list[Region] = []
        for y in range(max(len(before), len(after))):
            old = before[y] if y < len(before) else None
            new = after[y] if y < len(after) else None
            if old is new:
                continue
            if old is None or new is None:  # a line came or went: all of it
                moved.append(Region(0, y, key.size.width, 1))
            elif old != new:
                moved.append(Region(0, y, changed_to(old, new), 1))
        if moved:
            self.refresh(*moved)  # one call marks them all: each call costs the widget's geometry

    def show_state(self, view: Any) -> None:
        """Set state classes from a new view; subclasses say which."""

    def render(self) -> Text:
        """The view as text (what layout measures and tests read)."""
        if self.view is None:
            return Text("waiting for data…", style="dim")
        return self.draw(self.view)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if self._drawn_for is not None and self._tallest_width == width:
            return self._tallest
        return super().get_content_height(container, viewport, width)

    def render_line(self, y: int) -> Strip:
        key = self._draw_key()
        if key != self._drawn_for:
            self._draw(key)
            if self._sized_by_text() and self._tallest != key.size.height:
                self.refresh(layout=True)  # drawn for a new width, it wraps to another height
        if y < len(self._lines):
            return self._lines[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def draw(self, view: Any) -> Text:
        """Draw a view; subclasses say how."""
        return Text(str(view))

    def _draw_key(self) -> DrawKey:
        return DrawKey(self.size, self.visual_style, self.text_selection)

    def _sized_by_text(self) -> bool:
        """Whether the pane is as tall as its text (height: auto), so a taller text needs a layout."""
        height = self.styles.height
        return height is None or height.is_auto

    def _draw(self, key: DrawKey) -> None:
        """Draw the view into lines, reusing those of each row of text that did not change."""
        self.frames += 1
        size, style, selection = key
        text = self.render()
        if selection is not None:  # a selection is drawn across rows: all of it, as one
            visual = visualize(self, text, markup=False)
            self._lines = Visual.to_strips(self, visual, size.width, None, style)
            self._rows = {}
            self._drawn_for = key
            self._keep_height(size.width)
            return
        known = self._rows if key == self._drawn_for else {}
        rows: dict[RowKey, list[Strip]] = {}
        drawn: list[Strip] = []
        for index, row in enumerate(text.split("\n", allow_blank=True)):
            row_key = (index, row.plain, tuple(row.spans), row.style, row.no_wrap, row.overflow)
            strips = known.get(row_key)
            if strips is None:
                fitted = fitted_row(self, row, index, size.width, style, self._textual_row)
                strips = [fitted] if fitted is not None else None
            if strips is None:
                strips = self._textual_row(row, index, size.width, style)
            rows[row_key] = strips
            drawn.extend(strips)
        self._rows = rows
        self._lines = drawn
        self._drawn_for = key
        self._keep_height(size.width)

    def _textual_row(self, row: Text, y: int, width: int, style: VisualStyle) -> list[Strip]:
        """A row drawn by Textual's renderer as line `y` of the pane's text: below `y` empty
        rows, so each cell knows its place in the whole text as it would drawn all at once
        (what a mouse selection reads)."""
        placed = row.blank_copy("\n" * y)
        placed.append_text(row)
        visual = visualize(self, placed, markup=False)
        return Visual.to_strips(self, visual, width, None, style)[y:]

    def _keep_height(self, width: int) -> None:
        """Remember the most lines drawn at this width: the pane keeps that height, so a line
        that wraps one second and not the next does not move every pane below it."""
        if width != self._tallest_width:
            self._tallest_width, self._tallest = width, len(self._lines)
        else:
            self._tallest = max(self._tallest, len(self._lines))


def changed_to(old: Strip, new: Strip) -> int:
    """One past the last cell where two lines differ: what is right of it is left as it is."""
    before, after = list(old), list(new)
    end_before, end_after = old.cell_length, new.cell_length
    while before and after and end_before == end_after and before[-1] == after[-1]:
        end_before -= before.pop().cell_length
        end_after -= after.pop().cell_length
    if end_before != end_after:
        return max(end_before, end_after)
    cells_before, cells_after = _cells(before), _cells(after)
    end = len(cells_before)
    while end > 0 and cells_before[end - 1] == cells_after[end - 1]:
        end -= 1
    return end


def _cells(segments: list[Segment]) -> list[tuple[str, Style | None]]:
    """Segments as cells: the character and style of each (a wide character's second is '')."""
    cells: list[tuple[str, Style | None]] = []
    for text, style, _ in segments:
        for character in text:
            cells.append((character, style))
            if get_character_cell_size(character) == 2:
                cells.append(("", style))
    return cells


def line(*parts: tuple[str, str] | str) -> Text:
    """Join (text, style) parts and plain strings into one Text."""
    text = Text()
    for part in parts:
        if isinstance(part, str):
            text.append(part)
        else:
            text.append(part[0], style=part[1])
    return text


def lines(*rows: Text) -> Text:
    """Join Text rows with newlines."""
    return Text("\n").join(rows)
