"""The fleet screen through Pilot: tables updated in place, stale rows, narrow columns, Enter."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable

from slotop.actions.fleet.outliers import OutlierThresholds
from slotop.actions.fleet.table import FleetTable, fleet_table
from slotop.actions.fleet.tracker import FleetTracker
from slotop.collectors.fleet import FleetPoll, ReplicaFigures, ReplicaKey, latency_figure
from slotop.config import Settings
from slotop.tui.fleet_app import DrillIn, FleetApp, FleetUpdated

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
        # The server goes away: both rows stay, with their values, marked stale.
        app.post_message(FleetUpdated(tables.failed("cannot connect to http://p:9090")))
        await pilot.pause()
        assert cells(replicas, "slo") == ["STALE", "STALE"]
        assert cells(replicas, "ttft") == [">1,000 ms", "99.0 ms"]
        assert "STALE: cannot connect" in str(app.query_one("#fleet-state").render())


@pytest.mark.anyio
async def test_a_narrow_screen_keeps_the_essential_columns() -> None:
    tables = Tables()
    app = FleetApp(SETTINGS, None, first=tables.poll(figures("a:1", 0, 2)))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        replicas = app.query_one("#fleet-replicas", DataTable)
        keys = [c.key.value for c in replicas.ordered_columns]
        assert keys == ["name", "slo", "ttft", "itl", "tokens", "running", "waiting", "kv", "state"]
        assert cells(replicas, "name") == ["a:1"]


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
