"""The before/after panel's view: a restart's change at one load, measuring or measured (pure).

Built from the inputs' `BeforeAfter` each time the panes are built; it holds words and the table's
cells only, so an unchanged before/after gives an equal view and the panel does not repaint.
"""

from __future__ import annotations

from dataclasses import dataclass

from slotop.actions.restart.compare import Change
from slotop.actions.restart.live import BeforeAfter
from slotop.actions.restart.table import ComparisonTable

HIDE_KEY = "x"


@dataclass(frozen=True, slots=True)
class ChangeView:
    """What the panel shows: the change and its load, how far the measure is, the table, and
    its headline: the rows that moved beyond their noise, and how many did not."""

    title: str
    status: str
    measuring: bool
    sides: tuple[str, ...] = ()
    table: ComparisonTable | None = None
    hint: str = f"{HIDE_KEY} hides this until the next restart"
    better: tuple[str, ...] = ()
    worse: tuple[str, ...] = ()
    within_noise: int = 0
    noise_unknown: int = 0
    spans: tuple[str, ...] = ()
    """What each side spans, in words ("before: 50 requests sent over 10.2 s, …"), where known."""


def side_spans(table: ComparisonTable) -> tuple[str, ...]:
    """Each side's span from its line in the table ("before: label dials; span"), named."""
    spans = []
    for name, side in zip(("before", "after"), table.sides, strict=False):
        _, _, span = side.partition("; ")
        if span:
            spans.append(f"{name}: {span}")
    return tuple(spans)


def change_view(state: BeforeAfter | None) -> ChangeView | None:
    """The panel's view, or None when there is no before/after to show (the panel hides)."""
    if state is None:
        return None
    title = f"{state.changes}, at {state.load}"
    if state.table is None:
        if state.stopped:
            status = f"{state.stopped}: no before/after at the same load"
        elif state.settling:
            status = (
                "settling: the resumed streams' opening requests are still running; counting "
                "starts when they end"
            )
        elif state.wanted:
            status = f"measuring: {state.requests} of {state.wanted} requests with the new dials"
            if state.wanted_span_s is not None:
                status += f", over {state.span_s:.0f} of {state.wanted_span_s:.0f} s"
        else:
            status = "measuring: waiting for the replica's numbers since it came up"
        return ChangeView(title, status, measuring=not state.stopped)
    status = f"{state.stopped}; the table holds what was measured" if state.stopped else ""
    table = state.table
    verdicts = [row.verdict for row in table.rows]

    def labels(change: Change) -> tuple[str, ...]:
        return tuple(row.cells[0] for row in table.rows if row.verdict is change)

    return ChangeView(
        title,
        status,
        False,
        table.sides,
        table,
        spans=side_spans(table),
        better=labels(Change.BETTER),
        worse=labels(Change.WORSE),
        within_noise=sum(v in (Change.WITHIN_NOISE, Change.SAME) for v in verdicts),
        noise_unknown=verdicts.count(Change.NOISE_UNKNOWN),
    )
