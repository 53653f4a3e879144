"""The KV-cache pane (occupancy, queues, budget) and the throughput line."""

from __future__ import annotations

from rich.text import Text

from slotop import fmt
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.dashboard import KvView, ThroughputView


class KvPane(Pane):
    """Blocks used as a bar, running/waiting, preemptions, prefix hits, the budget."""

    TITLE = "KV cache"

    def draw(self, view: KvView) -> Text:
        width = max(self.size.width, 4)
        ratio = view.usage_ratio
        style = "red" if view.full else "cyan"
        return lines(
            line((fmt.bar(ratio, width), style)),
            line(view.blocks),
            line(f"{view.queues}  {view.preemptions}"),
            line(view.hit_ratio),
            line((view.budget, "dim")),
            line((view.fp8_budget, "dim")),
        )


class ThroughputPane(Pane):
    """Prompt and generation tokens per second, requests per second."""

    TITLE = "Throughput"

    def draw(self, view: ThroughputView) -> Text:
        return Text(view.line)
