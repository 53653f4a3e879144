"""The probe pane: on/off, the dial, in-flight and completed requests, errors by class, and the
probe's own lag (red where it bends the numbers)."""

from __future__ import annotations

from rich.text import Text

from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.load import ProbePaneView


class ProbePane(Pane):
    """What slotop's own load is doing."""

    TITLE = "Probe (client side)"

    def draw(self, view: ProbePaneView) -> Text:
        state_style = "bold green" if view.running else "dim"
        rows = [line(("load ", "bold"), (view.state, state_style), f"  {view.level}")]
        if view.counts:
            rows.append(line(view.counts))
        rows.append(line((view.errors, "red" if "none" not in view.errors else "dim")))
        if view.lag:
            rows.append(line((view.lag, "bold red" if view.client_bound else "dim")))
        if view.sweep:
            rows.append(line((view.sweep, "bold cyan")))
        return lines(*rows)
