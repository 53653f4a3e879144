"""The base of every pane: one reactive view, set from above, drawn as Rich text.

An equal view is not even compared twice: the reactive skips it. A new view repaints the pane,
and asks for a new layout only when the number of lines it draws changed, so a ticking number
costs one pane's repaint, not a reflow of the screen.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class Pane(Widget):
    """A pane that shows `view`; an equal view does not trigger a repaint."""

    TITLE: ClassVar[str] = ""
    view: reactive[Any] = reactive(None)
    frames: int = 0
    _drawn_lines: int = -1

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def watch_view(self, view: Any) -> None:
        self.show_state(view)
        width = self.size.width
        text = self._text(view)
        drawn = len(text.wrap(self.app.console, width)) if width > 0 else -2
        if drawn != self._drawn_lines:
            self._drawn_lines = drawn
            self.refresh(layout=True)

    def show_state(self, view: Any) -> None:
        """Set state classes from a new view; subclasses say which."""

    def _text(self, view: Any) -> Text:
        if view is None:
            return Text("waiting for data…", style="dim")
        return self.draw(view)

    def render(self) -> Text:
        self.frames += 1
        return self._text(self.view)

    def draw(self, view: Any) -> Text:
        """Draw a view; subclasses say how."""
        return Text(str(view))


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
