"""The SLO pane: pXX TTFT and ITL against their targets, server and client side by side."""

from __future__ import annotations

from rich.text import Text

from slotop import fmt
from slotop.actions.slo import Verdict
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views import SloView

VERDICT_STYLE = {Verdict.PASS: "bold green", Verdict.BREACH: "bold red", Verdict.UNKNOWN: "dim"}
VERDICT_WORD = {Verdict.PASS: "PASS", Verdict.BREACH: "BREACH", Verdict.UNKNOWN: fmt.NA}


class SloPane(Pane):
    """Pass or breach at a glance, with the window and sample counts behind it."""

    TITLE = "SLO"

    def show_state(self, view: SloView | None) -> None:
        self.set_class(view is not None and view.verdict is Verdict.BREACH, "-breach")
        self.set_class(view is not None and view.verdict is Verdict.PASS, "-pass")

    def draw(self, view: SloView) -> Text:
        rows = [
            line(
                (f" {VERDICT_WORD[view.verdict]} ", f"reverse {VERDICT_STYLE[view.verdict]}"),
                f"  {view.window}",
            ),
            line(("          target     server     client", "dim")),
        ]
        for row in view.rows:
            gap = ("  gap!", "bold yellow") if row.gap else ""
            rows.append(
                line(
                    f"{row.name:<9} {row.target:<10} ",
                    (f"{row.server:<10}", VERDICT_STYLE[row.verdict]),
                    f" {row.client:<10}",
                    gap,
                )
            )
            if row.bucket:
                rows.append(line((f"{'':<10} {row.bucket}", "dim")))
        rows.append(line((view.samples, "dim")))
        rows.append(line(view.goodput))
        return lines(*rows)
