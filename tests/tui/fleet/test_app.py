"""The fleet screen through Pilot: tables updated in place, stale rows, narrow columns, Enter."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable

from slotop.actions.fleet.outliers import OutlierThresholds
from slotop.actions.fleet.table import FleetTable, fleet_table
from slotop.actions.fleet.tracker import FleetTracker
from slotop.actions.fleet.wiring import FleetWatch
from slotop.collectors.fleet import FleetPoll, ReplicaFigures, ReplicaKey, latency_figure
from slotop.config import Settings
from slotop.tui.fleet.app import DrillIn, FleetApp, FleetUpdated

INF = float("inf")
SETTINGS = Settings()


def figures(instance: str, ttft_upper_count: float, running: float) -> ReplicaFigures:
    # 100 requests, ttft_upper_count of them over a second: p99 is then clamped at 1 s.
    fast = 100.0 - ttft_upper_count
    return ReplicaFigures(
        key=ReplicaKey((("job", "vllm"), ("instance", instance), ("model_name", "m"))),
        model="m",
        window_s=60.0,
        ttft=latency_figure(99.0, ((0.1, fast), (1.0, fast), (INF, 100.0))),
        itl=latency_figure(99.0, ((0.01, 100.0), (INF, 100.0))),
        generation_tokens_per_s=123.4,
        preemptions_per_s=0.0,
        running=running,
        waiting=0.0,
        kv_usage_ratio=0.5,
        up=True,
    )


class Tables:
    def __init__(self) -> None:
        self.tracker = FleetTracker()

    def poll(self, *replicas: ReplicaFigures, at_s: float = 100.0) -> FleetTable:
        state = self.tracker.update(FleetPoll(at_s, replicas, "Prometheus http://p:9090"))
        return fleet_table(state, SETTINGS.slo, OutlierThresholds())

    def failed(self, reason: str) -> FleetTable:
        state = self.tracker.failed(reason, 101.0)
        return fleet_table(state, SETTINGS.slo, OutlierThresholds())


def cells(table: DataTable[object], column: str) -> list[str]:
    index = [c.key.value for c in table.ordered_columns].index(column)
    return [str(table.get_row_at(row)[index]) for row in range(table.row_count)]


@pytest.mark.anyio
async def test_rows_update_in_place_sort_worst_first_and_go_stale() -> None:
    tables = Tables()
    app = FleetApp(SETTINGS, None, clock=lambda: 100.0)
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(FleetUpdated(tables.poll(figures("a:1", 0, 2), figures("b:1", 0, 3))))
        await pilot.pause()
        replicas = app.query_one("#fleet-replicas", DataTable)
        assert replicas.row_count == 2
        assert cells(replicas, "slo") == ["PASS", "PASS"]
        assert "bucket ms" in [str(c.label) for c in replicas.ordered_columns]
        keys_before = list(replicas.rows)
        # b breaches now: it moves to the top, its cells change, the rows are the same rows.
        app.post_message(FleetUpdated(tables.poll(figures("a:1", 0, 2), figures("b:1", 50, 3))))
        await pilot.pause()
        assert cells(replicas, "name") == ["b:1", "a:1"]
        assert cells(replicas, "slo") == ["BREACH", "PASS"]
        assert cells(replicas, "ttft") == [">1,000 ms", "99.0 ms"]
        assert list(replicas.rows) == keys_before
        models = app.query_one("#fleet-models", DataTable)
        assert cells(models, "slo") == ["BREACH"]  # merged: 50 of 200 over 1 s
        headings = [str(c.label) for c in models.ordered_columns][:2]
        assert headings == ["model", "replicas"]  # what the model rows hold there
        assert cells(models, "name") == ["Σ m"] and cells(models, "model") == ["2 replicas"]
        # The server goes away: both rows stay, with their values, marked stale.
        app.post_message(FleetUpdated(tables.failed("cannot connect to http://p:9090")))
        await pilot.pause()
        assert cells(replicas, "slo") == ["STALE", "STALE"]
        assert cells(replicas, "ttft") == [">1,000 ms", "99.0 ms"]
        assert "STALE: cannot connect" in str(app.query_one("#fleet-state").render())


def unserved(instance: str) -> ReplicaFigures:
    # Up, yet no request ended in the window: no verdict (N/A), as a replica's first poll reads.
    none = latency_figure(99.0, ((0.1, 0.0), (1.0, 0.0), (INF, 0.0)))
    return dataclasses.replace(figures(instance, 0, 0), ttft=none)


@pytest.mark.anyio
async def test_a_cell_that_grows_widens_its_column_on_screen() -> None:
    tables = Tables()
    app = FleetApp(SETTINGS, None, clock=lambda: 100.0)
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(FleetUpdated(tables.poll(unserved("a:1"))))
        await pilot.pause()
        replicas = app.query_one("#fleet-replicas", DataTable)
        assert cells(replicas, "slo") == ["N/A"]
        app.post_message(FleetUpdated(tables.poll(figures("a:1", 50, 2))))
        await pilot.pause()
        assert cells(replicas, "slo") == ["BREACH"]
        shown = [replicas.render_line(y).text for y in range(replicas.size.height)]
        row = next(line for line in shown if "a:1" in line)
        assert " BREACH " in row and " >1,000 ms " in row, row


@pytest.mark.anyio
async def test_a_narrow_screen_keeps_the_essential_columns() -> None:
    tables = Tables()
    app = FleetApp(SETTINGS, None, first=tables.poll(figures("a:1", 0, 2)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        replicas = app.query_one("#fleet-replicas", DataTable)
        keys = [c.key.value for c in replicas.ordered_columns]
        assert keys == ["name", "slo", "state", "ttft", "itl", "tokens", "running", "waiting", "kv"]
        assert cells(replicas, "name") == ["a:1"]


def direct(url: str, ttft_upper_count: float, kv_usage_ratio: float) -> ReplicaFigures:
    """A replica scraped directly: named by its URL, as `slotop fleet URL URL ...` names it."""
    return dataclasses.replace(
        figures("", ttft_upper_count, 2),
        key=ReplicaKey((("url", url),), url=url),
        kv_usage_ratio=kv_usage_ratio,
    )


@pytest.mark.anyio
async def test_at_80_columns_replicas_named_by_url_show_host_port_and_their_whole_state() -> None:
    # a: TTFT p99 clamped at 1 s, ten times the median (99 ms) with its bucket above it, so slow,
    # and KV 100% against a median of 50%, so skewed on KV. d is down. The widest cells (a 25-cell
    # name, BREACH, >1,000 ms, 100%, the state) make the row wider than the 78 cells inside the
    # border, so the figures at its right end are cut, never the state beside the verdict.
    urls = [f"http://vllm-{name}.prod.internal:8000/" for name in "abcd"]
    down = dataclasses.replace(direct(urls[3], 0, 0.5), up=False)
    table = Tables().poll(
        direct(urls[0], 50, 1.0), direct(urls[1], 0, 0.5), direct(urls[2], 0, 0.5), down
    )
    app = FleetApp(SETTINGS, None, first=table)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        replicas = app.query_one("#fleet-replicas", DataTable)
        shown = [replicas.render_line(y).text for y in range(replicas.size.height)]
        expected = {
            "vllm-a.prod.internal:8000": "slow, skew KV",
            "vllm-b.prod.internal:8000": "up",
            "vllm-c.prod.internal:8000": "up",
            "vllm-d.prod.internal:8000": "down (up = 0)",
        }
        for name, state in expected.items():
            row = next(line for line in shown if f" {name} " in line)
            assert f" {state} " in row, row
        assert not any("http://" in line for line in shown)
        heading = shown[0]
        assert heading.index(" state ") < heading.index(" TTFT p99 "), heading


@pytest.mark.anyio
async def test_a_narrow_screen_shows_the_whole_reason_a_source_failed() -> None:
    tables = Tables()
    app = FleetApp(SETTINGS, None, first=tables.poll(figures("a:1", 0, 2)))
    reason = (
        "cannot connect to http://127.0.0.1:1/api/v1/query ([Errno 111] Connection refused); "
        "is Prometheus running there, and reachable?"
    )
    async with app.run_test(size=(80, 24)) as pilot:
        app.post_message(FleetUpdated(tables.failed(reason)))
        await pilot.pause()
        state = app.query_one("#fleet-state")
        shown = " ".join(state.render_line(y).text.strip() for y in range(state.size.height))
        assert "is Prometheus running there, and reachable?" in shown, shown


@pytest.mark.anyio
async def test_enter_chooses_the_replica_under_the_cursor() -> None:
    tables = Tables()
    first = tables.poll(figures("a:1", 0, 2), figures("b:1", 50, 3))
    app = FleetApp(SETTINGS, None, first=first)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("down", "enter")
    assert isinstance(app.return_value, DrillIn)
    assert app.return_value.name == "a:1"  # b breaches, so it sorts first; the cursor moved down
    assert app.return_value.key.label("instance") == "a:1"


class HeldSource:
    """A fleet source that counts the polls running at once; one poll can be held open until
    released, as a slow server holds a refresh."""

    source = "Prometheus http://p:9090"

    def __init__(self) -> None:
        self.polls = 0
        self.running = 0
        self.most_at_once = 0
        self.hold_next = False
        self.held = threading.Event()
        self.release = threading.Event()
        self.another_began = threading.Event()
        self._count = threading.Lock()

    def poll(self) -> FleetPoll:
        with self._count:
            self.polls += 1
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            if self.held.is_set():
                self.another_began.set()
            holding, self.hold_next = self.hold_next, False
        try:
            if holding:
                self.held.set()
                self.release.wait(30.0)
            at_s = 100.0 + self.polls
            return FleetPoll(at_s, (figures("a:1", 0, 2), figures("b:1", 50, 3)), self.source)
        finally:
            with self._count:
                self.running -= 1

    def close(self) -> None:
        """Nothing to release."""


async def until(pilot: Pilot[object], happened: Callable[[], bool], within_s: float) -> bool:
    """Let the app run until `happened()`, for at most `within_s`; whether it did."""
    deadline = time.monotonic() + within_s
    while not happened() and time.monotonic() < deadline:
        await pilot.pause(0.01)
    return happened()


@pytest.mark.anyio
async def test_a_refresh_in_flight_at_enter_never_overlaps_the_next_screens_refresh() -> None:
    source = HeldSource()
    watch = FleetWatch(source, SETTINGS)
    first = watch.refresh()
    source.hold_next = True
    app = FleetApp(SETTINGS, watch.refresh, first=first)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            assert await until(pilot, source.held.is_set, 10.0)
            await pilot.press("enter")
        assert isinstance(app.return_value, DrillIn)
        assert source.running == 1  # the refresh is still in flight
        # The dashboard is quit at once: the fleet screen comes back and polls again.
        asked = threading.Event()

        def refresh() -> FleetTable:
            asked.set()
            return watch.refresh()

        again = FleetApp(SETTINGS, refresh, first=app.fleet)
        async with again.run_test(size=(160, 50)) as pilot:
            assert await until(pilot, asked.is_set, 10.0)
            # A refresh free to overlap the held one begins within this second; this must not.
            assert not await until(pilot, source.another_began.is_set, 1.0)
            source.release.set()
            # The held poll ends first, then the new screen's own polls are folded and shown.
            assert await until(pilot, lambda: again.fleet is not app.fleet, 10.0)
            assert again.fleet is not None and again.fleet.taken_at_s >= 103.0
    finally:
        source.release.set()
    assert source.most_at_once == 1


def test_a_partial_window_is_named_in_the_notes_and_the_json() -> None:
    from slotop.actions.fleet.report import fleet_to_json
    from slotop.tui.fleet.view import notes

    partial = dataclasses.replace(figures("a:1", 0.0, 1.0), covered_s=12.5)
    table = Tables().poll(partial, figures("b:1", 0.0, 1.0))
    assert [line for line in notes(table) if "partial" in line] == [
        "model m: partial window: the source holds 12s of the 1m 00s window; rates are over "
        "those 12s",
        "a:1: partial window: the source holds 12s of the 1m 00s window; rates are over those 12s",
    ]
    data = fleet_to_json(table, mode="prometheus")
    by_name = {row["name"]: row for row in data["replicas"]}
    assert (by_name["a:1"]["partial_window"], by_name["a:1"]["covered_s"]) == (True, 12.5)
    assert (by_name["b:1"]["partial_window"], by_name["b:1"]["covered_s"]) == (False, None)
    assert (data["models"][0]["partial_window"], data["models"][0]["covered_s"]) == (True, 12.5)


@pytest.mark.anyio
async def test_one_model_on_two_engines_is_two_model_rows() -> None:
    tables = Tables()
    sglang = dataclasses.replace(figures("b:1", 0, 3), engine="sglang")
    vllm = dataclasses.replace(figures("a:1", 0, 2), engine="vllm")
    app = FleetApp(SETTINGS, None, clock=lambda: 100.0)
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(FleetUpdated(tables.poll(vllm, sglang)))
        await pilot.pause()
        models = app.query_one("#fleet-models", DataTable)
        assert sorted(cells(models, "name")) == ["Σ m", "Σ m (SGLang)"]
        replicas = app.query_one("#fleet-replicas", DataTable)
        assert sorted(cells(replicas, "model")) == ["m", "m (SGLang)"]
    # each engine's model row is named apart in the notes too
    from slotop.tui.fleet.view import notes

    both = tables.poll(
        dataclasses.replace(vllm, covered_s=12.5), dataclasses.replace(sglang, covered_s=12.5)
    )
    assert sorted(line.split(":")[0] for line in notes(both) if line.startswith("model")) == [
        "model m",
        "model m (SGLang)",
    ]
