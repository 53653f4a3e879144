"""The curve pane: TTFT, ITL and output tokens/s against concurrency, plotted or as a table.

The plot shows the current configuration's curve over the previous one's (dimmed), each panel's
y axis scaled to its data, each latency with its target as a dashed line (or, where the target
is far above the data, its value over the panel) and the operating point marked ▲ under the
axis; `c` switches to the numbers. It draws only when its view changes (a point moved, a
configuration opened) or the pane is resized: its view holds no clock.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text

from slotop import fmt
from slotop.actions.experiment.model import CurvePoint
from slotop.actions.slo import Verdict, judge
from slotop.tui.panes.base import Pane, line, lines
from slotop.tui.panes.braille import Series, dot_row, plot_rows, slot_column
from slotop.tui.views.load import CURVE_COLUMNS, CurveView

CURRENT_STYLE = "bold cyan"
PREVIOUS_STYLE = "grey50"
TARGET_STYLE = "red"
MARK_STYLE = "bold green"
LABEL_WIDTH = 4
PANEL_GAP = 2
MIN_PLOT_WIDTH = 6
MIN_PLOT_HEIGHT = 2
HEADROOM = 1.15
"""The top of a panel's y axis over its largest value (or target), so a line never clips."""
TARGET_IN_VIEW = 2.0
"""How far over the data a target may sit and still set the top of the y axis; a target further
up would press the curve flat onto the bottom rows, so the panel's label names it instead."""


def compact(value: float) -> str:
    """A y-axis label in at most four characters: 4.5, 740, 1.2k, 12k."""
    if value < 10:
        return f"{value:.1f}"
    if value < 1000:
        return f"{value:.0f}"
    if value < 10_000:
        return f"{value / 1000:.1f}k"
    return f"{value / 1000:.0f}k"


Metric = Callable[[CurvePoint], float | None]


def _ms(get: Callable[[CurvePoint], float | None]) -> Metric:
    def metric(point: CurvePoint) -> float | None:
        value = get(point)
        return None if value is None else value * 1e3

    return metric


def _values(
    points: tuple[CurvePoint, ...], slots: tuple[int, ...], metric: Metric
) -> tuple[float | None, ...]:
    by_concurrency = {p.concurrency: metric(p) for p in points}
    return tuple(by_concurrency.get(c) for c in slots)


def target_above(view: CurveView, slots: tuple[int, ...], metric: Metric, target: float) -> bool:
    """Whether a target sits so far over both curves' values that the y axis leaves it out."""
    seen = [
        v
        for v in (*_values(view.previous, slots, metric), *_values(view.points, slots, metric))
        if v is not None
    ]
    return bool(seen) and target > TARGET_IN_VIEW * max(seen)


def _target_words(target: float, width: int) -> str:
    """Where an off-scale target is, in the longest words that fit a panel's width."""
    for words in (f"target {compact(target)} ms above", f"target {compact(target)} above"):
        if len(words) <= width:
            return words
    return f"target {compact(target)} ↑"[:width]


def _panel(
    view: CurveView,
    slots: tuple[int, ...],
    metric: Metric,
    target: float | None,
    width: int,
    height: int,
) -> list[Text]:
    """One panel's plot rows, each led by its y label and axis; the y axis runs from 0 to just
    over the data, and the target, unless the target is far above (`target_above`)."""
    previous, current = _values(view.previous, slots, metric), _values(view.points, slots, metric)
    seen = [v for v in (*previous, *current) if v is not None]
    if target is not None and target_above(view, slots, metric, target):
        target = None  # drawn nowhere; the panel's label says where it is
    top = max([*seen, target or 0.0, 1e-9]) * HEADROOM
    rows = plot_rows(
        (Series(previous, PREVIOUS_STYLE), Series(current, CURRENT_STYLE)),
        width=width,
        height=height,
        top=top,
        target=target,
        target_style=TARGET_STYLE,
    )
    labels = {0: compact(top), height - 1: "0"}
    if target is not None:
        labels.setdefault(dot_row(target, top, height) // 4, compact(target))
    out = []
    for row, drawn in enumerate(rows):
        label = labels.get(row)
        head = Text(f"{label or '':>{LABEL_WIDTH}}{'┤' if label else '│'}", style="dim")
        out.append(head + drawn)
    return out


def _ticks(slots: tuple[int, ...], recommended: int | None, width: int) -> Text:
    """The concurrencies under a panel: ▲ at the operating point, and the first and the last
    where they leave it room."""
    cells = [" "] * width
    taken: list[tuple[int, int]] = []
    marked: tuple[int, int] | None = None
    if recommended in slots:
        mark = f"▲{recommended}"[:width]
        column = slot_column(slots.index(recommended), len(slots), width) // 2
        start = max(min(column, width - len(mark)), 0)
        marked = (start, start + len(mark))
        taken.append((marked[0] - 1, marked[1] + 1))
    ends = [(0, str(slots[0]))]
    if len(slots) > 1:
        ends.append((width - len(str(slots[-1])), str(slots[-1])))
    for start, label in ends:
        span = (start, start + len(label))
        if start >= 0 and all(span[1] <= a or span[0] >= b for a, b in taken):
            cells[span[0] : span[1]] = label
            taken.append((span[0] - 1, span[1] + 1))
    if marked is not None:
        cells[marked[0] : marked[1]] = f"▲{recommended}"[:width]
    lead = LABEL_WIDTH + 1
    text = Text(" " * lead + "".join(cells)[:width], style="dim")
    if marked is not None:
        text.stylize(MARK_STYLE, lead + marked[0], lead + marked[1])
    return text


def draw_plot(view: CurveView, width: int, height: int) -> Text | None:
    """The three panels side by side, their titles above and ticks below, the note last;
    None where the pane is too small for a plot that reads."""
    panel_width = (width - 2 * PANEL_GAP) // 3
    plot_width = panel_width - LABEL_WIDTH - 1
    plot_height = height - 3
    if plot_width < MIN_PLOT_WIDTH or plot_height < MIN_PLOT_HEIGHT:
        return None
    slots = tuple(sorted({p.concurrency for p in (*view.points, *view.previous)}))
    if not slots:
        return line((view.note, "bold"))
    panels = (
        (f"{view.ttft_name} ms", _ms(lambda p: p.ttft_s), view.ttft_target_s * 1e3),
        (f"{view.itl_name} ms", _ms(lambda p: p.itl_s), view.itl_target_s * 1e3),
        ("out tok/s", lambda p: p.output_tokens_per_s, None),
    )
    gap = " " * PANEL_GAP
    titles = Text(gap).join(
        Text(f"{title:<{panel_width}}"[:panel_width], style="bold") for title, _, _ in panels
    )
    above = [
        _target_words(target, panel_width)
        if target is not None and target_above(view, slots, metric, target)
        else ""
        for _, metric, target in panels
    ]
    rows = [titles]
    if any(above):
        plot_height -= 1
        if plot_height < MIN_PLOT_HEIGHT:
            return None
        rows.append(
            Text(gap).join(
                Text(f"{words:<{panel_width}}", style=TARGET_STYLE if words else "")
                for words in above
            )
        )
    drawn = [
        _panel(view, slots, metric, target, plot_width, plot_height) for _, metric, target in panels
    ]
    rows += [Text(gap).join(parts) for parts in zip(*drawn, strict=True)]
    ticks = _ticks(slots, view.recommended, plot_width)
    rows.append(Text(gap).join([ticks, ticks, ticks]))
    note = line((view.note, "bold"))
    note.truncate(width, overflow="ellipsis")  # one line: the ▲ already marks the point
    rows.append(note)
    return lines(*rows)


def draw_table(view: CurveView, height: int) -> Text:
    """The numbers: a row per concurrency, latencies red over their target, green within."""
    widths = CURVE_COLUMNS
    targets = " ".join(
        f"{text:>{w}}"
        for text, w in zip(
            ("", f"<{fmt.ms(view.ttft_target_s)}", f"<{fmt.ms(view.itl_target_s)}"),
            widths,
            strict=False,
        )
    )
    rows = [line((view.header, "dim")), line((targets, "dim"))]
    room = max(height - 3, 1)
    for point in view.points[-room:]:
        mark = " ◀" if point.concurrency == view.recommended else ""
        ttft_bad = judge(point.ttft_s, view.ttft_target_s) is Verdict.BREACH
        itl_bad = judge(point.itl_s, view.itl_target_s) is Verdict.BREACH
        rows.append(
            line(
                f"{point.concurrency:>{widths[0]}} ",
                (f"{fmt.ms(point.ttft_s):>{widths[1]}}", "red" if ttft_bad else "green"),
                " ",
                (f"{fmt.ms(point.itl_s):>{widths[2]}}", "red" if itl_bad else "green"),
                f" {fmt.number(point.output_tokens_per_s):>{widths[3]}}"
                f" {fmt.number(point.goodput_rps, 1):>{widths[4]}}"
                f" {point.requests:>{widths[5]}}{mark}",
            )
        )
    rows.append(line((view.note, "bold")))
    return lines(*rows)


class CurvePane(Pane):
    """The curve of the current configuration beside the previous one's; `c` shows the numbers."""

    TITLE = "Curve: latency and throughput vs concurrency"

    def show_state(self, view: CurveView | None) -> None:
        if view is None or not view.label:
            self.border_title = self.TITLE
            return
        title = f"Curve {view.label}"
        if view.previous_label:
            title += f" vs [dim]{view.previous_label}[/dim]"
        self.border_title = title

    def draw(self, view: CurveView) -> Text:
        if not view.table:
            plotted = draw_plot(view, self.size.width, self.size.height)
            if plotted is not None:
                return plotted
        return draw_table(view, self.size.height)
