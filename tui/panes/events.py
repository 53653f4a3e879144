"""The events pane: every action and every notable change, newest at the bottom."""

from __future__ import annotations

from rich.text import Text
from textual.visual import Visual, visualize

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.dashboard import EventsView

_KIND_STYLE = {"down": "red", "up": "green", "reset": "yellow", "error": "red", "warn": "yellow"}


class EventsPane(Pane):
    """The session's timeline."""

    TITLE = "Events"

    def draw(self, view: EventsView) -> Text:
        if not view.lines:
            return Text("nothing yet", style="dim")
        room = max(self.size.height, 1)
        shown: list[Text] = []
        for stamp, kind, text in reversed(view.lines):
            row = line((f"{stamp} ", "dim"), (f"{kind:<6} ", _KIND_STYLE.get(kind, "cyan")), text)
            room -= self._height(row)
            if shown and room < 0:
                break  # an entry that wraps takes its rows: the newest stay in sight
            shown.append(row)
        return lines(*reversed(shown))

    def _height(self, row: Text) -> int:
        """How many screen lines a row wraps to at the pane's width, as the pane draws it."""
        width = max(self.size.width, 1)
        return len(
            Visual.to_strips(
                self, visualize(self, row, markup=False), width, None, self.visual_style
            )
        )
