"""The header: who the replica is, its cache shape, and whether the data is fresh."""

from __future__ import annotations

from rich.text import Text

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views import HeaderView


class HeaderPane(Pane):
    """Two lines at the top of the screen."""

    def show_state(self, view: HeaderView | None) -> None:
        self.set_class(view is not None and view.state == "stale", "-stale")
        self.set_class(view is not None and view.state == "paused", "-paused")
        self.set_class(view is not None and view.state == "replay", "-replay")

    def draw(self, view: HeaderView) -> Text:
        style = "bold red" if view.state == "stale" else "bold green"
        if view.state in ("waiting", "paused"):
            style = "bold yellow"
        if view.state == "replay":
            style = "bold magenta"
        first = line((view.freshness, style), "  ", (view.title, "bold"))
        second = line(view.cache)
        for row in (first, second):
            row.no_wrap = True
            row.overflow = "ellipsis"
        return lines(first, second)
