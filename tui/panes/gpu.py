"""The GPU pane: one line per device, or a clear line when none is visible."""

from __future__ import annotations

from rich.text import Text

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views import GpuView


class GpuPane(Pane):
    """Utilisation, memory, power, clocks, temperature and throttling per GPU."""

    TITLE = "GPU"

    def draw(self, view: GpuView) -> Text:
        style = "" if view.available else "yellow"
        return lines(*(line((text, style)) for text in view.lines))
