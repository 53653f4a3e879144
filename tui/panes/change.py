"""The before/after panel: after a restart, the same load's numbers under the old and new dials.

It lays out the same table `slotop restart` prints (`table_lines`, fitted to the panel's width)
and colours each row's verdict; hidden while there is nothing to show.
"""

from __future__ import annotations

from rich.text import Text

from slotop.actions.restart.compare import Change
from slotop.actions.restart.table import SHORT_VERDICTS, table_lines
from slotop.tui.change_view import ChangeView
from slotop.tui.panes.base import Pane, line, lines

VERDICT_STYLES = {
    Change.BETTER: "bold green",
    Change.WORSE: "bold red",
    Change.NOISE_UNKNOWN: "yellow",
}


class ChangePane(Pane):
    """A restart's before/after at one load, each delta marked beyond the noise or not."""

    TITLE = "Before / after the restart"

    def show_state(self, view: ChangeView | None) -> None:
        self.display = view is not None
        self.set_class(view is not None and view.measuring, "-measuring")

    def draw(self, view: ChangeView) -> Text:
        rows = [line((view.title, "bold"))]
        if view.status:
            rows.append(line((view.status, "yellow" if view.measuring else "")))
        table = view.table
        if table is not None:
            rows += [line((side, "dim")) for side in table.sides]
            width = self.content_size.width or None
            laid_out = table_lines(table, width)
            rows.append(line((laid_out[0], "dim")))
            for text, row in zip(laid_out[1:], table.rows, strict=True):
                verdict = row.cells[-1]
                if not text.endswith(verdict):
                    verdict = SHORT_VERDICTS.get(verdict, verdict)  # a narrow panel's words
                style = VERDICT_STYLES.get(row.verdict) if row.verdict is not None else None
                if style and verdict and text.endswith(verdict):
                    rows.append(line(text[: -len(verdict)], (verdict, style)))
                else:
                    rows.append(line(text))
            rows += [line((note, "dim")) for note in table.footer]
        rows.append(line((view.hint, "dim")))
        return lines(*rows)
