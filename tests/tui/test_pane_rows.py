"""A pane's row that fits its line, drawn the short way, is the line Textual's renderer draws.

`fitted_row` (tui/textual_internals.py) draws such a row straight into its cells, skipping the
wrapping Textual's renderer works through (and the empty rows above it that keep a mouse
selection's offsets right the other way). Here every kind of row a pane shows is drawn both ways and compared segment by
segment, styles and selection offsets included: plain, styled in parts, styled as a whole, empty,
wide characters, marks, trailing spaces, exactly as wide as the line. Rows the short way leaves to
Textual (wider than the line, holding a tab) come out the same as before too.
"""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult

from slotop.tui import textual_internals
from slotop.tui.panes.base import Pane

pytestmark = pytest.mark.anyio

WIDTH = 30
"""The pane's text width: 34 columns less its border and padding."""


class _Rows(Pane):
    def draw(self, view: list[Text]) -> Text:
        return Text("\n").join(view)


class _OnePane(App[None]):
    CSS = "_Rows { width: 34; height: auto; border: round white; padding: 0 1; }"

    def compose(self) -> ComposeResult:
        yield _Rows(id="rows")


def _rows() -> list[Text]:
    parts = Text("p99  ")
    parts.append("244 ms", style="bold red")
    parts.append("  target ", style="dim")
    parts.append("< 500 ms")
    whole = Text("waiting for data…", style="dim italic")
    nested = Text("KV ", style="green")
    nested.append("25%", style="bold")
    nested.append(" used")
    return [
        Text("binds: nothing"),
        parts,
        whole,
        Text(""),
        Text("模型 Qwen 千问 ✔ ✘ ▂▃▅▇█"),
        Text("trailing   "),
        Text("x" * WIDTH),
        nested,
        Text("x" * (WIDTH + 7)),  # wider than the line: Textual wraps it
        Text("a\ttab"),  # a tab: Textual expands it
        Text("after the long ones"),
    ]


@pytest.mark.skipif(
    not textual_internals.allowed().fitted_rows, reason="this Textual draws rows its own way only"
)
async def test_rows_drawn_the_short_way_equal_textual_s_own() -> None:
    app = _OnePane()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(_Rows)
        with textual_internals.using(textual_internals.ALL):
            pane.view = _rows()
            await pilot.pause()
            assert pane.size.width == WIDTH
            short = list(pane._lines)
            # Drawn both ways while the first rows are checked: it would be off had they differed.
            assert textual_internals.in_use().fitted_rows
        with textual_internals.using(textual_internals.PLAIN):
            pane._drawn_for = None
            pane.render_line(0)
            textual = list(pane._lines)
        assert len(short) == len(textual) == len(_rows()) + 1  # the wide row took two lines
        for y, (ours, theirs) in enumerate(zip(short, textual, strict=True)):
            assert list(ours) == list(theirs), f"line {y}: {ours.text!r}"
            assert ours.cell_length == theirs.cell_length
