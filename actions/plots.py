"""PNG plots with matplotlib: curves against concurrency, and a session's timeline with its actions.

What to draw is plain data (`CurveFigure`, `TimelineFigure`), built by the sweep and by the session
report; this module only draws it, with the Agg backend (no display needed), importing matplotlib
when a plot is drawn so commands that draw none never pay for it. Every figure has a fixed size in
pixels (`CURVE_SIZE_PX`, `TIMELINE_SIZE_PX`), the same for every session.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slotop.actions.errors import ActionError

if TYPE_CHECKING:
    from matplotlib.axes import Axes

DPI = 100
CURVE_PANEL_PX = (500, 440)
"""Width and height of one panel of a curve figure; the figure is as many panels wide."""
TIMELINE_SIZE_PX = (1400, 900)
"""Width and height of a timeline figure."""


class PlotError(ActionError):
    """A plot cannot be drawn or written; the message names the file and what to do."""


@dataclass(frozen=True, slots=True)
class Series:
    """One line: x and y values (None: no value there, a gap in the line), its label and look.

    `style` is matplotlib's short format ("o-", "s--", "."); `faint` draws it lighter (the
    previous configuration beside the current one, the server beside the client).
    """

    label: str
    x: tuple[float, ...]
    y: tuple[float | None, ...]
    style: str = "o-"
    faint: bool = False
    step: bool = False


@dataclass(frozen=True, slots=True)
class Panel:
    """One set of axes: its y label, its lines, a target drawn as a horizontal line, lines on a
    right-hand axis of their own, and whether the y axis starts at 0 (rates: a small change
    must not fill the panel)."""

    ylabel: str
    series: tuple[Series, ...]
    target: float | None = None
    target_label: str = ""
    right: tuple[Series, ...] = ()
    right_label: str = ""
    zero_based: bool = False


@dataclass(frozen=True, slots=True)
class CurveFigure:
    """Panels side by side against concurrency, on a base-2 axis, the operating point marked."""

    title: str
    panels: tuple[Panel, ...]
    ticks: tuple[int, ...]
    chosen: int | None = None
    chosen_label: str = "operating point"
    xlabel: str = "concurrency (requests in flight)"


@dataclass(frozen=True, slots=True)
class Mark:
    """An action on the timeline: a vertical line at `x` with a short label."""

    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Span:
    """A stretch of the timeline (a measured sweep step), shaded, with a short label."""

    start: float
    end: float
    label: str


@dataclass(frozen=True, slots=True)
class TimelineFigure:
    """Panels stacked over one time axis (seconds after the session's start), actions marked."""

    title: str
    panels: tuple[Panel, ...]
    marks: tuple[Mark, ...] = ()
    spans: tuple[Span, ...] = ()
    xlabel: str = "seconds after the session's start"


def curve_size_px(figure: CurveFigure) -> tuple[int, int]:
    """The size of a curve figure's PNG in pixels: one panel's width per panel."""
    width, height = CURVE_PANEL_PX
    return width * max(len(figure.panels), 1), height


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotError(
            "cannot draw the plot: matplotlib, which slotop needs for its plots, is not "
            "installed; reinstall slotop (pip install --force-reinstall slotop) or "
            "pip install matplotlib"
        ) from None
    return plt


def _values(series: Series) -> list[float]:
    return [math.nan if v is None else v for v in series.y]


def _draw_series(axes: Axes, series: Series, color: Any = None) -> None:
    kwargs: dict[str, Any] = {"label": series.label, "alpha": 0.45 if series.faint else 1.0}
    if color is not None:
        kwargs["color"] = color
    if series.step:
        axes.step(series.x, _values(series), where="post", **kwargs)
    else:
        axes.plot(
            series.x,
            _values(series),
            series.style,
            markersize=3 if "." in series.style else 5,
            **kwargs,
        )


def _draw_panel(axes: Axes, panel: Panel) -> None:
    for series in panel.series:
        _draw_series(axes, series)
    if panel.target is not None:
        axes.axhline(panel.target, color="red", linestyle=":", label=panel.target_label)
    axes.set_ylabel(panel.ylabel)
    axes.grid(alpha=0.3)
    if panel.zero_based:
        axes.set_ylim(bottom=0)
    handles, labels = axes.get_legend_handles_labels()
    if panel.right:
        twin = axes.twinx()
        for series in panel.right:
            _draw_series(twin, series, color="tab:gray")
        twin.set_ylabel(panel.right_label)
        more_handles, more_labels = twin.get_legend_handles_labels()
        handles, labels = handles + more_handles, labels + more_labels
    if handles:
        axes.legend(handles, labels, fontsize="small", loc="upper left")


def _png(plt: Any, figure: Any) -> bytes:
    out = io.BytesIO()
    try:
        figure.savefig(out, dpi=DPI, format="png")
    finally:
        plt.close(figure)
    return out.getvalue()


def curves_png(figure: CurveFigure) -> bytes:
    """A curve figure as a PNG of `curve_size_px(figure)`."""
    plt = _pyplot()
    width, height = curve_size_px(figure)
    drawn, axes_row = plt.subplots(
        1, max(len(figure.panels), 1), figsize=(width / DPI, height / DPI), squeeze=False
    )
    for axes, panel in zip(axes_row[0], figure.panels, strict=False):
        if figure.chosen is not None:
            axes.axvline(
                figure.chosen,
                color="green",
                alpha=0.5,
                label=f"{figure.chosen_label}: {figure.chosen}",
            )
        _draw_panel(axes, panel)
        if figure.ticks:
            axes.set_xscale("log", base=2)
            axes.set_xticks(figure.ticks, [str(c) for c in figure.ticks])
            axes.minorticks_off()
        axes.set_xlabel(figure.xlabel)
    drawn.suptitle(figure.title)
    drawn.tight_layout()
    return _png(plt, drawn)


def timeline_png(figure: TimelineFigure) -> bytes:
    """A timeline figure as a PNG of `TIMELINE_SIZE_PX`, every action a labelled line."""
    plt = _pyplot()
    width, height = TIMELINE_SIZE_PX
    count = max(len(figure.panels), 1)
    drawn, column = plt.subplots(
        count, 1, figsize=(width / DPI, height / DPI), sharex=True, squeeze=False
    )
    axes_list = [row[0] for row in column]
    for axes, panel in zip(axes_list, figure.panels, strict=False):
        for span in figure.spans:
            axes.axvspan(span.start, span.end, color="tab:blue", alpha=0.08)
        for mark in figure.marks:
            axes.axvline(mark.x, color="tab:purple", alpha=0.7, linewidth=1)
        _draw_panel(axes, panel)
    top = axes_list[0]
    for span in figure.spans:
        top.annotate(
            span.label,
            xy=((span.start + span.end) / 2, 1.0),
            xycoords=("data", "axes fraction"),
            ha="center",
            va="bottom",
            fontsize="x-small",
            color="tab:blue",
        )
    _label_marks(top, figure.marks)
    axes_list[-1].set_xlabel(figure.xlabel)
    drawn.suptitle(figure.title)
    drawn.tight_layout()
    return _png(plt, drawn)


def _label_marks(axes: Axes, marks: Sequence[Mark]) -> None:
    """Each mark's short label above the top panel, three heights in turn so close marks stay
    apart."""
    for turn, mark in enumerate(marks):
        axes.annotate(
            mark.label,
            xy=(mark.x, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 2 + 9 * (turn % 3)),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize="x-small",
            color="tab:purple",
        )


def png_bytes(figure: CurveFigure | TimelineFigure) -> bytes:
    """Any figure as PNG bytes."""
    return curves_png(figure) if isinstance(figure, CurveFigure) else timeline_png(figure)


def write_png(figure: CurveFigure | TimelineFigure, path: Path) -> None:
    """Draw a figure into a PNG file; PlotError names the file and what to do."""
    try:
        data = png_bytes(figure)
    except PlotError as exc:
        raise PlotError(f"{path}: {exc}") from None
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise PlotError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
