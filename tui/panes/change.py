"""The before/after panel: after a restart, the same load's numbers under the old and new dials.

Its border names the change and the load; its first line, the headline, says what moved beyond
the run-to-run noise, and the next what each side spans (how many requests over how long, how
far past the load's start or resume, how long it took to settle). Below, the same rows
`slotop restart` prints (`table_lines`), each verdict
coloured: in two columns side by side where the panel is wide enough (160 columns), so the panel
stays short enough for every other pane to keep its place on screen; the notes follow, one line
each there. The sides' dials and the legend stay with `slotop restart` and the report.
"""

from __future__ import annotations

from rich.markup import escape
from rich.text import Text

from slotop.actions.restart.compare import Change
from slotop.actions.restart.table import SHORT_VERDICTS, ComparisonTable, TableRow, table_lines
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.views.change import ChangeView

VERDICT_STYLES = {
    Change.BETTER: "bold green",
    Change.WORSE: "bold red",
    Change.NOISE_UNKNOWN: "yellow",
}
COLUMN_GAP = " │ "
"""Between the table's two halves in a wide panel."""


class ChangePane(Pane):
    """A restart's before/after at one load, each delta marked beyond the noise or not."""

    TITLE = "Before / after the restart"

    def show_state(self, view: ChangeView | None) -> None:
        self.display = view is not None
        self.set_class(view is not None and view.measuring, "-measuring")
        if view is not None:
            self.border_title = f"{self.TITLE}: {escape(view.title)}"
            self.border_subtitle = escape(view.hint)

    def draw(self, view: ChangeView) -> Text:
        rows = []
        if view.status:
            rows.append(line((view.status, "yellow" if view.measuring else "")))
        table = view.table
        if table is not None:
            rows.append(headline(view))
            width = self.content_size.width or None
            halves = table_halves(table, width) if width is not None else None
            rows += span_rows(view.spans, width, side_by_side=halves is not None)
            if halves is None:
                rows += table_rows(table, width)
            else:
                rows += halves
            for note in (n for n in table.footer if n.startswith("note: ")):
                text = line((note, "dim"))
                if halves is not None and width is not None:
                    text.truncate(width, overflow="ellipsis")  # one line each, in a wide panel
                rows.append(text)
        return lines(*rows)


def span_rows(spans: tuple[str, ...], width: int | None, *, side_by_side: bool) -> list[Text]:
    """What each side spans, dim: side by side on one line in a wide panel, else a line each."""
    if not spans:
        return []
    if side_by_side and width is not None:
        joined = line((COLUMN_GAP.join(spans), "dim"))
        joined.truncate(width, overflow="ellipsis")
        return [joined]
    return [line((span, "dim")) for span in spans]


def headline(view: ChangeView) -> Text:
    """What moved beyond the run-to-run noise, better and worse, and how many rows did not."""
    text = Text()
    if not view.better and not view.worse:
        text.append("nothing moved beyond the run-to-run noise", style="bold")
    else:
        text.append("beyond the run-to-run noise: ")
        parts = [("better", view.better, "bold green"), ("worse", view.worse, "bold red")]
        shown = [(word, labels, style) for word, labels, style in parts if labels]
        for index, (word, labels, style) in enumerate(shown):
            if index:
                text.append("; ")
            text.append(f"{word} {', '.join(labels)}", style=style)
    if view.within_noise:
        text.append(f" · {view.within_noise} within noise", style="dim")
    if view.noise_unknown:
        text.append(f" · {view.noise_unknown} noise unknown", style="yellow")
    return text


def _row_text(text: str, row: TableRow) -> Text:
    """A laid-out row with its verdict coloured (a narrow panel's shorter word too)."""
    verdict = row.cells[-1]
    if not text.endswith(verdict):
        verdict = SHORT_VERDICTS.get(verdict, verdict)
    style = VERDICT_STYLES.get(row.verdict) if row.verdict is not None else None
    if style and verdict and text.endswith(verdict):
        return line(text[: -len(verdict)], (verdict, style))
    return line(text)


def table_rows(table: ComparisonTable, width: int | None) -> list[Text]:
    """The header and a line per row, fitted to `width`."""
    laid_out = table_lines(table, width)
    rows = [line((laid_out[0], "dim"))]
    rows += [_row_text(t, r) for t, r in zip(laid_out[1:], table.rows, strict=True)]
    return rows


def table_halves(table: ComparisonTable, width: int) -> list[Text] | None:
    """The rows in two columns side by side, each under the header, where both fit in `width`
    (the first half of the rows on the left); None where they do not."""
    half = (width - len(COLUMN_GAP)) // 2
    laid_out = table_lines(table, half)
    if len(table.rows) < 2 or max(len(t) for t in laid_out) > half:
        return None
    body = [_row_text(t, r) for t, r in zip(laid_out[1:], table.rows, strict=True)]
    split = (len(body) + 1) // 2
    left, right = body[:split], body[split:]
    header = line((laid_out[0], "dim"))
    rows = []
    for first, second in zip([header, *left], [header, *right, Text()], strict=False):
        joined = first.copy()
        joined.pad_right(half - first.cell_len)
        joined.append(COLUMN_GAP, style="dim")
        joined.append_text(second)
        rows.append(joined)
    return rows
