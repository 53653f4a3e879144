"""The dashboard attached to replicas that misbehave (slow, hung, endless, huge, garbage,
duplicated, backwards) says STALE with the reason, goes on answering keys, and reads a huge
page it is allowed to read. How fast a key is answered is measured in bench/bench_hostile.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from slotop.config import Settings, with_overrides
from slotop.tui.panes.header import HeaderPane
from slotop.tui.run import build_app, with_url
from tests.support.hostile_replica import hostile_replica
from tests.support.pilot import wait_until

pytestmark = pytest.mark.anyio


async def _until(pilot: Any, condition: Callable[[], bool], timeout_s: float = 30.0) -> None:
    await wait_until(pilot, condition, timeout_s, step_s=0.1)


def _settings(url: str, **overrides: object) -> Settings:
    settings = with_overrides(
        Settings(),
        {"replica.timeout_s": 0.5, "replica.scrape_interval_s": 0.5, "session.record": False},
    )
    return with_overrides(with_url(settings, url), overrides)


@pytest.mark.parametrize(
    ("kind", "overrides", "reason"),
    [
        ("slow", {}, "did not answer within 0.5 s"),
        ("hang", {}, "did not answer within 0.5 s"),
        ("drip", {}, "did not answer within 0.5 s"),
        ("endless", {"replica.max_scrape_mb": 2.0}, "sent more than 2 MiB"),
        # the cap, not the clock, is what this one trips: a busy machine reads 16 MiB slowly
        ("huge", {"replica.max_scrape_mb": 16.0, "replica.timeout_s": 30.0}, "more than 16 MiB"),
        ("garbage", {}, "not Prometheus text exposition format"),
        ("duplicate", {}, "appears twice"),
    ],
)
async def test_a_bad_replica_shows_stale_with_its_reason_and_keys_still_work(
    kind: str, overrides: dict[str, object], reason: str
) -> None:
    with hostile_replica(kind) as server:
        app = build_app(_settings(server.url, **overrides))
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.views is not None and app.views.header.state == "stale")
            assert app.views is not None
            status = " ".join(part.text for part in app.views.header.status)
            assert "STALE" in status and reason in status
            header = app.query_one(HeaderPane)
            await pilot.press("p")
            await _until(pilot, lambda: header.view is not None and header.view.state == "paused")
            await pilot.press("p")
            await _until(pilot, lambda: header.view is not None and header.view.state == "stale")
            await pilot.press("q")


async def test_a_huge_page_within_the_cap_is_shown_fresh() -> None:
    with hostile_replica("huge") as server:
        app = build_app(_settings(server.url, **{"replica.timeout_s": 30.0}))
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(pilot, lambda: app.views is not None and app.views.header.state == "fresh")
            assert app.inputs.poll is not None and app.inputs.poll.value is not None
            assert app.inputs.poll.value.requests.running == 8.0
            await pilot.press("q")


async def test_counters_going_back_are_a_restart_on_the_timeline_not_an_error() -> None:
    with hostile_replica("backwards") as server:
        app = build_app(_settings(server.url))
        async with app.run_test(size=(160, 50)) as pilot:
            await _until(
                pilot,
                lambda: any("counters went back" in e.text for e in app.inputs.events),
            )
            assert app.views is not None and app.views.header.state == "fresh"
            await pilot.press("q")
