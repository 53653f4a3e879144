"""The events pane: every action and every notable change, newest at the bottom."""

from __future__ import annotations

from rich.text import Text

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views import EventsView

_KIND_STYLE = {"down": "red", "up": "green", "reset": "yellow", "error": "red"}


class EventsPane(Pane):
    """The session's timeline."""

    TITLE = "Events"

    def draw(self, view: EventsView) -> Text:
        room = max(self.size.height, 1)
        if not view.lines:
            return Text("nothing yet", style="dim")
        return lines(
            *(
                line((f"{stamp} ", "dim"), (f"{kind:<6} ", _KIND_STYLE.get(kind, "cyan")), text)
                for stamp, kind, text in view.lines[-room:]
            )
        )
