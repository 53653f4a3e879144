"""The GPU pane: one line per device, or a clear line when none is visible."""

from __future__ import annotations

from rich.text import Text

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views import SIMULATED_GPU, GpuView


class GpuPane(Pane):
    """Utilisation, memory, power, clocks, temperature and throttling per GPU.

    The simulated replica's modelled GPUs (shown only where NVML reads none) carry the word
    SIMULATED on every line, in the warning colour, so they are never taken for real ones.
    """

    TITLE = "GPU"

    def draw(self, view: GpuView) -> Text:
        style = "" if view.available else "yellow"
        text = lines(*(line((row, style)) for row in view.lines))
        if view.simulated:
            text.highlight_words([SIMULATED_GPU], "bold yellow")
        return text
