"""The header: who the replica is, its cache shape, and whether the data is fresh.

Two lines that never wrap: each is fitted to the pane's width by `fit`, which leaves out the
least important items first, so an 80-column terminal keeps the freshness, the model, the URL
and the figures that matter, and a wide one shows everything.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.text import Text

from slotop.tui.panes.base import Pane, lines
from slotop.tui.views.header import ALWAYS, HeaderPart, HeaderView

GAP = "  "
"""What stands between two items of a line."""


class HeaderPane(Pane):
    """Two lines at the top of the screen."""

    def show_state(self, view: HeaderView | None) -> None:
        self.set_class(view is not None and view.state == "stale", "-stale")
        self.set_class(view is not None and view.state == "paused", "-paused")
        self.set_class(view is not None and view.state == "replay", "-replay")

    def draw(self, view: HeaderView) -> Text:
        style = "bold red" if view.state == "stale" else "bold green"
        if view.state in ("waiting", "paused"):
            style = "bold yellow"
        if view.state == "replay":
            style = "bold magenta"
        width = self.content_size.width
        status_and_who = (*view.status, *view.who)
        styles = [style] * len(view.status) + ["bold"] * len(view.who)
        first = _styled(fit(status_and_who, width), styles)
        second = _styled(fit(view.where, width), [""] * len(view.where))
        return lines(first, second)


def _styled(shown: list[str | None], styles: list[str]) -> Text:
    """The items shown, a gap apart; items of one style next to each other make one run."""
    runs: list[tuple[str, str]] = []
    for words, style in zip(shown, styles, strict=True):
        if words is None:
            continue
        if runs and runs[-1][1] == style:
            runs[-1] = (runs[-1][0] + GAP + words, style)
        else:
            runs.append((words, style))
    text = Text()
    for index, (words, style) in enumerate(runs):
        if index:
            text.append(GAP)
        text.append(words, style=style)
    return text


def fit(parts: tuple[HeaderPart, ...], width: int) -> list[str | None]:
    """Each item's words as shown in `width` cells, None where it is left out.

    While the line is too long, items go (or take their short words) lowest rank first, the
    rightmost first among equals; then the items that always stay are cut with an ellipsis,
    the rightmost first. A width of 0 or less (not laid out yet) leaves every item whole.
    """
    shown: list[str | None] = [part.text for part in parts]
    if width <= 0:
        return shown

    def length() -> int:
        kept = [cell_len(words) for words in shown if words is not None]
        return sum(kept) + len(GAP) * max(0, len(kept) - 1)

    ranked = sorted(range(len(parts)), key=lambda index: (parts[index].keep, -index))
    for index in ranked:
        if length() <= width or parts[index].keep >= ALWAYS:
            break
        shown[index] = parts[index].short
    for index in reversed(range(len(parts))):
        words = shown[index]
        if length() <= width:
            break
        if words is None:
            continue
        room = cell_len(words) - (length() - width)
        shown[index] = cut(words, room) if room >= 1 else None
    return shown


def cut(words: str, cells: int) -> str:
    """`words` in at most `cells` cells, ending in an ellipsis where they were longer."""
    if cell_len(words) <= cells:
        return words
    return set_cell_size(words, cells - 1).rstrip() + "…"
