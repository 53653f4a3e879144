"""The base of every pane: one reactive view, set from above, drawn as Rich text."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


class Pane(Widget):
    """A pane that shows `view`; an equal view does not trigger a repaint."""

    TITLE: ClassVar[str] = ""
    view: reactive[Any] = reactive(None, layout=True)
    frames: int = 0

    def on_mount(self) -> None:
        self.border_title = self.TITLE

    def render(self) -> Text:
        self.frames += 1
        if self.view is None:
            return Text("waiting for data…", style="dim")
        return self.draw(self.view)

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
