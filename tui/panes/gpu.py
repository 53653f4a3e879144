"""The GPU pane: one line per device, or a clear line when none is visible."""

from __future__ import annotations

from rich.text import Text

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.dashboard import SIMULATED_GPU, GpuView


class GpuPane(Pane):
    """Utilisation, memory, power, clocks, temperature and throttling per GPU.

    The simulated replica's modelled GPUs (shown only where NVML reads none) carry the word
    SIMULATED on every line, in the warning colour, so they are never taken for real ones.
    """

    TITLE = "GPU"

    def draw(self, view: GpuView) -> Text:
        style = "" if view.available else "yellow"
        width = self.content_size.width
        names = view.names or ("",) * len(view.lines)
        rows = (fit_name(row, name, width) for row, name in zip(view.lines, names, strict=True))
        text = lines(*(line((row, style)) for row in rows))
        if view.simulated:
            text.highlight_words([SIMULATED_GPU], "bold yellow")
        return text


def fit_name(row: str, name: str, width: int) -> str:
    """A device's line within `width`: the name at its end shortened with an ellipsis, or
    left off, so the numbers before it stay on one line (a line without the name is kept)."""
    if width <= 0 or len(row) <= width or not name or not row.endswith(name):
        return row
    numbers = row[: -len(name)]
    room = width - len(numbers)
    if room >= 3:  # a name cut to one letter and an ellipsis names nothing
        return f"{numbers}{name[: room - 1].rstrip()}…"
    return numbers.rstrip()
