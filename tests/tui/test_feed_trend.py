"""The latency trend kept row by row equals the one read again from every snapshot."""

from __future__ import annotations

import dataclasses

from slotop.collectors.histograms import QuantileEstimate
from slotop.collectors.history import History
from slotop.collectors.snapshot import Snapshot
from slotop.tui.feed import TrendRows, trend_of
from tests.support.tui_fakes import capture_snapshot

BASE = capture_snapshot()


def _snapshot(second: int) -> Snapshot:
    """The capture at `second`, its short-window TTFT p99 set to the second (so each differs)."""
    short = BASE.short_window or BASE.window
    ttft = dataclasses.replace(
        short.ttft_s,
        percentiles=tuple(
            (p, QuantileEstimate(p / 100, float(second), 0.0, 1e9, 10.0) if p == 99.0 else e)
            for p, e in short.ttft_s.percentiles
        ),
    )
    window = dataclasses.replace(short, ttft_s=ttft)
    return dataclasses.replace(BASE, taken_at_s=float(second), short_window=window)


def test_rows_kept_as_the_history_grows_equal_a_full_reading() -> None:
    history: History[Snapshot] = History(10)
    rows = TrendRows(points=4)
    for second in range(1, 13):
        history.append(float(second), _snapshot(second))
        kept = rows.trend(history)
        assert kept == trend_of([s for _, s in list(history)[-4:]])
        assert kept.ttft_p99_s == tuple(float(s) for s in range(max(1, second - 3), second + 1))
    assert rows.trend(history) == kept  # no new snapshot: the same trend


def test_several_snapshots_at_once_and_a_cleared_history() -> None:
    history: History[Snapshot] = History(10)
    rows = TrendRows(points=4)
    assert rows.trend(history) == trend_of([])
    for second in (1, 2, 3):
        history.append(float(second), _snapshot(second))
    assert rows.trend(history).times_s == (1.0, 2.0, 3.0)
    history.clear()  # the snapshot last read is gone: start again from what is there
    history.append(9.0, _snapshot(9))
    assert rows.trend(history).times_s == (9.0,)


def test_history_after_gives_what_came_after_a_value() -> None:
    history: History[str] = History(3)
    for word in ("a", "b", "c", "d"):
        history.append(0.0, word)
    assert history.after("c") == (["d"], True)
    assert history.after("d") == ([], True)
    assert history.after("a") == (["b", "c", "d"], False)  # fell off
    assert history.after(None) == (["b", "c", "d"], False)
