"""Views from inputs: an idle replica's views stay equal from one second to the next."""

from __future__ import annotations

import dataclasses

from tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh

from slotop.config import Settings
from slotop.tui.messages import LatencyTrend
from slotop.tui.views import Inputs, build_views


def _idle_trend(points: int) -> LatencyTrend:
    nothing = (None,) * points
    return LatencyTrend(
        tuple(FROZEN_NOW_S - points + i for i in range(points)),
        nothing,
        nothing,
        nothing,
        nothing,
        nothing,
        nothing,
    )


def test_an_idle_replica_gives_equal_views_as_seconds_pass() -> None:
    snapshot = capture_snapshot()
    inputs = Inputs(
        settings=Settings(),
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S - 5,
        poll=fresh(snapshot),
        last_poll_at_s=FROZEN_NOW_S,
        trend=_idle_trend(10),
    )
    later = dataclasses.replace(
        inputs,
        now_s=FROZEN_NOW_S + 1,
        last_poll_at_s=FROZEN_NOW_S + 1,
        trend=_idle_trend(11),
        poll=fresh(dataclasses.replace(snapshot, taken_at_s=FROZEN_NOW_S + 1)),
    )
    assert build_views(later) == build_views(inputs)


def test_a_new_value_changes_only_the_views_that_show_it() -> None:
    snapshot = capture_snapshot()
    inputs = Inputs(
        settings=Settings(),
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S,
        poll=fresh(snapshot),
        last_poll_at_s=FROZEN_NOW_S,
    )
    busier = dataclasses.replace(
        snapshot, requests=dataclasses.replace(snapshot.requests, waiting=3.0)
    )
    before = build_views(inputs)
    after = build_views(dataclasses.replace(inputs, poll=fresh(busier)))
    changed = {
        f.name
        for f in dataclasses.fields(before)
        if getattr(before, f.name) != getattr(after, f.name)
    }
    assert changed == {"kv", "diagnosis"}
