"""Small line plots in braille cells (2 × 4 dots each), drawn as Rich text rows.

Pure: a plot is a function of its series and its size, so a pane draws it only when a point
moved. The x axis is categorical (one slot per measured concurrency, evenly spaced), the y axis
runs from 0 to `top`; a later series is drawn over an earlier one where their cells meet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from rich.text import Text

BRAILLE_EMPTY = 0x2800
DOT_BITS: tuple[tuple[int, int], ...] = ((0x01, 0x08), (0x02, 0x10), (0x04, 0x20), (0x40, 0x80))
"""The bit of each dot in a braille cell, by row (top to bottom) then column (left, right)."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: a value per x slot (None: not measured there), and its style."""

    values: tuple[float | None, ...]
    style: str


def slot_column(slot: int, slots: int, width: int) -> int:
    """The dot column of an x slot: the first at the left edge, the last at the right."""
    if slots <= 1:
        return width  # one slot: the middle of 2 × width dot columns
    return round(slot * (2 * width - 1) / (slots - 1))


def dot_row(value: float, top: float, height: int) -> int:
    """The dot row of a value: 0 on the bottom row, `top` (or more) on the top one."""
    rows = 4 * height
    share = min(max(value / top, 0.0), 1.0) if top > 0 else 0.0
    return round((1.0 - share) * (rows - 1))


def _line(x0: int, y0: int, x1: int, y1: int) -> list[tuple[int, int]]:
    """The dots from one point to the next (Bresenham)."""
    dots = []
    dx, dy = abs(x1 - x0), -abs(y1 - y0)
    sx, sy = (1 if x0 < x1 else -1), (1 if y0 < y1 else -1)
    error = dx + dy
    while True:
        dots.append((x0, y0))
        if x0 == x1 and y0 == y1:
            return dots
        doubled = 2 * error
        if doubled >= dy:
            error += dy
            x0 += sx
        if doubled <= dx:
            error += dx
            y0 += sy


def plot_rows(
    series: Sequence[Series],
    *,
    width: int,
    height: int,
    top: float,
    target: float | None = None,
    target_style: str = "red",
) -> list[Text]:
    """`height` rows of `width` braille cells: each series' line, and a dashed target line in
    the cells no line passes through."""
    cells: dict[tuple[int, int], tuple[int, str]] = {}
    for one in series:
        slots = len(one.values)
        known = [
            (slot_column(i, slots, width), dot_row(v, top, height))
            for i, v in enumerate(one.values)
            if v is not None
        ]
        dots = [known[0]] if len(known) == 1 else []
        for (x0, y0), (x1, y1) in pairwise(known):
            dots += _line(x0, y0, x1, y1)
        for x, y in dots:
            x = min(max(x, 0), 2 * width - 1)
            key = (y // 4, x // 2)
            bits = cells.get(key, (0, ""))[0] | DOT_BITS[y % 4][x % 2]
            cells[key] = (bits, one.style)
    target_row = dot_row(target, top, height) if target is not None else None
    rows = []
    for row in range(height):
        text = Text()
        for column in range(width):
            found = cells.get((row, column))
            if found is not None:
                text.append(chr(BRAILLE_EMPTY + found[0]), style=found[1])
            elif target_row is not None and target_row // 4 == row and column % 2 == 0:
                both = DOT_BITS[target_row % 4]
                text.append(chr(BRAILLE_EMPTY + both[0] + both[1]), style=target_style)
            else:
                text.append(" ")
        rows.append(text)
    return rows
