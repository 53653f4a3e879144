"""The latency pane: server p50/p90/p99 of TTFT and ITL over time, the target, action markers."""

from __future__ import annotations

from rich.text import Text

from slotop import fmt
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.dashboard import LatencyView

_LABEL = 9


def _series(
    label: str, values: tuple[float | None, ...], top: float, target: float, width: int
) -> Text:
    shown = values[-width:]
    text = Text(f"{label:<{_LABEL}}")
    drawn = fmt.spark(shown, width, top)
    pad = width - len(shown)
    text.append(drawn[:pad])
    # One span per run of cells on the same side of the target, not one per cell: a run costs
    # one style to render and to send however long it is.
    start = pad
    over = [value is not None and value > target for value in shown]
    for index in range(1, len(over) + 1):
        if index == len(over) or over[index] != over[index - 1]:
            text.append(drawn[start : pad + index], style="red" if over[index - 1] else "green")
            start = pad + index
    last = next((v for v in reversed(values) if v is not None), None)
    text.append(f" {fmt.ms(last)}")
    return text


class LatencyPane(Pane):
    """Sparklines scaled to the largest value shown; red cells are over the target."""

    TITLE = "Latency (server, short window)"

    def draw(self, view: LatencyView) -> Text:
        width = max(self.size.width - _LABEL - 14, 4)
        rows: list[Text] = []
        for name, series, target in (
            ("TTFT", view.ttft, view.ttft_target_s),
            ("ITL", view.itl, view.itl_target_s),
        ):
            present = [v for _, s in series for v in s[-width:] if v is not None]
            top = max(present) if present else target
            rows.append(
                line((f"{name}", "bold"), f"  target {fmt.ms(target)}  top row {fmt.ms(top)}")
            )
            for label, values in series:
                if label == "p90" and self.size.height < 10:
                    continue
                rows.append(_series(f" {label}", values, top, target, width))
        marks = "".join("▲" if m else " " for m in view.markers[-width:]).rjust(width)
        rows.append(line((f"{'actions':<{_LABEL}}{marks}", "yellow")))
        rows.append(line((view.phases, "dim")))
        return lines(*rows)
