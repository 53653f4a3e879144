"""The SLO pane: pXX TTFT and ITL against their targets, server and client side by side."""

from __future__ import annotations

from rich.text import Text

from slotop import fmt
from slotop.actions.slo import Verdict
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.slo import SloView

VERDICT_STYLE = {
    Verdict.PASS: "bold green",
    Verdict.BREACH: "bold red",
    Verdict.UNDECIDED: "bold yellow",
    Verdict.UNKNOWN: "dim",
}
VERDICT_WORD = {
    Verdict.PASS: "PASS",
    Verdict.BREACH: "BREACH",
    Verdict.UNDECIDED: "UNDECIDED",
    Verdict.UNKNOWN: fmt.NA,
}


class SloPane(Pane):
    """Pass, breach or undecided at a glance, with the window and sample counts behind it; no
    verdict at all while the data is stale."""

    TITLE = "SLO"

    def show_state(self, view: SloView | None) -> None:
        self.set_class(view is not None and view.verdict is Verdict.BREACH, "-breach")
        self.set_class(view is not None and view.verdict is Verdict.PASS, "-pass")
        self.set_class(view is not None and view.verdict is Verdict.UNDECIDED, "-undecided")
        self.set_class(view is not None and view.stale, "-stale")

    def draw(self, view: SloView) -> Text:
        headline = (
            (" STALE ", "reverse dim")
            if view.stale
            else (f" {VERDICT_WORD[view.verdict]} ", f"reverse {VERDICT_STYLE[view.verdict]}")
        )
        rows = [
            line(headline, f"  {view.window}"),
            line(("          target     server     client", "dim")),
        ]
        for row in view.rows:
            gap = ("  gap!", "bold yellow") if row.gap else ""
            rows.append(
                line(
                    f"{row.name:<9} {row.target:<10} ",
                    (f"{row.server:<10}", "dim" if view.stale else VERDICT_STYLE[row.verdict]),
                    f" {row.client:<10}",
                    gap,
                )
            )
            if row.bucket:
                rows.append(line((f"{'':<10} {row.bucket}", "dim")))
        rows.append(line((view.samples, "dim")))
        rows.append(line(view.goodput))
        if view.note:
            rows.append(line((view.note, "bold yellow")))
        return lines(*rows)
