"""The litmus checklist and the one-line diagnosis of what binds now."""

from __future__ import annotations

from rich.text import Text

from slotop.actions.slo import Binding, Diagnosis
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.dashboard import LitmusView

BINDING_WORDS = {
    Binding.NO_DATA: "no data",
    Binding.IDLE: "idle",
    Binding.KV_CAPACITY: "KV capacity",
    Binding.SEQ_CAP: "seq cap (max_num_seqs)",
    Binding.TOKEN_BUDGET: "token budget (max_num_batched_tokens)",
    Binding.QUEUEING: "queueing",
    Binding.TTFT: "TTFT",
    Binding.ITL: "ITL",
    Binding.NOTHING: "nothing",
}


class LitmusPane(Pane):
    """The method's four tests, each ticked from live data with the reason; a test judged on the
    simulated replica's modelled GPUs says SIMULATED, in the warning colour."""

    TITLE = "Litmus"

    def draw(self, view: LitmusView) -> Text:
        rows = []
        for item in view.items:
            tick = ("✔ ", "bold green") if item.ticked else ("✘ ", "bold red")
            row = line(tick, item.label, (f": {item.detail}", "dim"))
            if item.simulated:
                row.highlight_words(["SIMULATED"], "bold yellow")
            rows.append(row)
        return lines(*rows)


class DiagnosisPane(Pane):
    """What binds now, from the metrics, with the evidence."""

    def draw(self, view: Diagnosis) -> Text:
        quiet = view.binding in (Binding.NOTHING, Binding.IDLE, Binding.NO_DATA)
        return line(
            ("binds: ", "bold"),
            (BINDING_WORDS[view.binding], "bold green" if quiet else "bold yellow"),
            (f"  ({view.evidence})", "dim"),
        )
