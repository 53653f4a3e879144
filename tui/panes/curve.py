"""The curve pane: pXX TTFT and ITL against concurrency, the targets, the recommended point."""

from __future__ import annotations

from rich.text import Text

from slotop import fmt
from slotop.actions.slo import Verdict, judge
from slotop.tui.load_views import CurveView
from slotop.tui.panes.base import Pane, line, lines


class CurvePane(Pane):
    """One row per measured concurrency, its latencies coloured against the targets."""

    TITLE = "Curve: latency vs concurrency"

    def draw(self, view: CurveView) -> Text:
        rows = [line((view.header, "dim"))]
        room = max(self.size.height - 2, 1)
        for point in view.points[-room:]:
            mark = "◀" if point.concurrency == view.recommended else " "
            ttft_bad = judge(point.ttft_s, view.ttft_target_s) is Verdict.BREACH
            itl_bad = judge(point.itl_s, view.itl_target_s) is Verdict.BREACH
            rows.append(
                line(
                    f"{point.concurrency:>4}  ",
                    (f"{fmt.ms(point.ttft_s):>15}", "red" if ttft_bad else "green"),
                    "  ",
                    (f"{fmt.ms(point.itl_s):>15}", "red" if itl_bad else "green"),
                    f" {point.requests:>5} {mark}",
                )
            )
        rows.append(line((view.note, "bold")))
        return lines(*rows)
