"""The app through Pilot with fakes: data flows down, keys become plans, quitting stops the load."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from slotop.actions.probe_control import ProbeControl, load_shape_from_settings
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import ReplicaSettings, Settings, settings_from_mapping
from slotop.errors import SlotopError
from slotop.tui.app import SlotopApp
from slotop.tui.keys import KEY_ACTIONS
from slotop.tui.messages import (
    GpuCollected,
    LatencyTrend,
    SnapshotCollected,
    TimelineEvent,
    TimelineNoted,
)
from slotop.tui.panes.header import HeaderPane
from slotop.tui.panes.slo import SloPane
from slotop.tui.screens.confirm import ConfirmScreen
from slotop.tui.screens.help import HelpScreen
from tests.support.fake_probe import FakeProbe
from tests.support.pilot import wait_until
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh, stale

pytestmark = pytest.mark.anyio

SNAPSHOT = capture_snapshot()


class Harness:
    """An app with a fake probe starter and a record of notifications."""

    def __init__(self, settings: Settings | None = None, fail_start: bool = False) -> None:
        self.settings = settings or Settings()
        self.probes: list[FakeProbe] = []
        self.notes: list[tuple[str, str]] = []

        def start(target: ProbeTarget, shape: LoadShape, c: int | None, r: float | None) -> Any:
            if fail_start:
                raise SlotopError("the probe could not start: test says no")
            probe = FakeProbe(c, closed_loop=True)
            self.probes.append(probe)
            return probe

        control = ProbeControl(
            ProbeTarget(base_url=self.settings.replica.url),
            load_shape_from_settings(self.settings.load),
            self.settings.load.allow_remote_load,
            start_probe=start,
            clock=lambda: FROZEN_NOW_S,
        )
        self.app = SlotopApp(self.settings, probe_control=control, clock=lambda: FROZEN_NOW_S)

        def notify(message: str, *, severity: str = "information", **_: object) -> None:
            self.notes.append((severity, message))

        self.app.notify = notify  # type: ignore[method-assign,assignment]


async def test_a_snapshot_fills_the_panes_and_a_failed_poll_marks_them_stale() -> None:
    harness = Harness()
    app = harness.app
    async with app.run_test(size=(160, 50)) as pilot:
        assert app.views is not None and app.views.header.state == "waiting"
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        await pilot.pause()
        assert app.views.header.state == "fresh"
        assert "tiny-llama" in app.views.header.title
        ttft = app.views.slo.rows[0]
        assert ttft.name == "TTFT p99" and ttft.server != "N/A" and ttft.bucket.startswith("bucket")
        assert not app.query_one(HeaderPane).has_class("-stale")

        app.post_message(SnapshotCollected(stale(SNAPSHOT, "connection refused"), LatencyTrend()))
        await pilot.pause()
        assert app.views.header.state == "stale"
        assert "connection refused" in app.views.header.freshness
        assert app.query_one(HeaderPane).has_class("-stale")
        assert app.views.slo.rows[0].server == ttft.server  # the last good value stays


async def test_the_slo_pane_never_says_pass_on_stale_data() -> None:
    # Targets far above every bucket the capture's quantiles fell in, so the fresh verdict passes.
    generous = settings_from_mapping({"slo": {"ttft_ms": 60_000, "itl_ms": 60_000}}, "test")
    app = Harness(generous).app
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        await pilot.pause()
        pane = app.query_one(SloPane)
        assert "PASS" in pane.render().plain and pane.has_class("-pass")

        app.post_message(SnapshotCollected(stale(SNAPSHOT, "connection refused"), LatencyTrend()))
        await pilot.pause()
        shown = pane.render().plain
        assert "PASS" not in shown and "STALE" in shown
        assert pane.has_class("-stale") and not pane.has_class("-pass")


async def _settled(pilot: Any, pane: SloPane) -> int:
    """Let the app run until the pane has painted all it will: its frame count, once steady."""
    before = -1
    while pane.frames != before:
        before = pane.frames
        await pilot.pause(0.05)
    return before


async def test_unchanged_data_does_not_repaint_a_pane() -> None:
    app = Harness().app
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        slo = app.query_one(SloPane)
        frames = await _settled(pilot, slo)  # on a busy machine the first paint comes late
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        assert await _settled(pilot, slo) == frames
        changed = dataclasses.replace(
            SNAPSHOT, requests=dataclasses.replace(SNAPSHOT.requests, waiting=7.0)
        )
        app.post_message(SnapshotCollected(fresh(changed), LatencyTrend()))
        await pilot.pause()
        assert app.views is not None and "waiting 7" in app.views.kv.queues


def test_data_messages_replace_their_own_kind_and_notes_never_do() -> None:
    first = SnapshotCollected(fresh(SNAPSHOT), LatencyTrend())
    second = SnapshotCollected(fresh(SNAPSHOT), LatencyTrend())
    gpu = GpuCollected(GpuSnapshot(0.0, unavailable_cause="x"))
    note = TimelineNoted(TimelineEvent(0.0, "up", "x"))
    assert second.can_replace(first)
    assert not second.can_replace(gpu)
    assert not note.can_replace(TimelineNoted(TimelineEvent(0.0, "up", "x")))


async def test_the_first_l_asks_with_target_and_cap_and_no_sends_nothing() -> None:
    harness = Harness()
    app = harness.app
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("l")
        assert isinstance(app.screen, ConfirmScreen)
        summary = str(app.screen.query_one("#confirm-summary").render())
        assert "http://127.0.0.1:8000/v1/completions" in summary
        assert "at most 64 in flight" in summary
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        assert harness.probes == []


async def test_confirmed_load_steps_and_quit_stops_it() -> None:
    harness = Harness()
    app = harness.app
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("l", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(harness.probes) == 1
        probe = harness.probes[0]
        assert probe.concurrencies == [1]
        await pilot.press("plus")
        await app.workers.wait_for_complete()
        await pilot.press("plus", "minus")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert probe.concurrencies == [1, 2, 3, 2]
        assert [e.kind for e in app.inputs.events].count("load") == 4
        await pilot.press("q")
        await pilot.pause()
        assert probe.stopped


async def test_stepping_while_the_load_is_off_is_refused_in_words() -> None:
    harness = Harness()
    async with harness.app.run_test() as pilot:
        await pilot.press("plus")
        assert harness.probes == []
        assert any("press l" in text for _, text in harness.notes)


async def test_load_on_a_remote_replica_is_refused_before_any_modal() -> None:
    settings = Settings(replica=ReplicaSettings(url="http://10.1.2.3:8000"))
    harness = Harness(settings)
    async with harness.app.run_test() as pilot:
        await pilot.press("l")
        await pilot.pause()
        assert not isinstance(harness.app.screen, ConfirmScreen)
        assert any("allow-remote-load" in text for _, text in harness.notes)


async def test_a_failing_worker_reaches_the_one_error_handler() -> None:
    harness = Harness(fail_start=True)
    app = harness.app
    async with app.run_test() as pilot:
        await pilot.press("l", "y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ("error", "the probe could not start: test says no") in harness.notes
        errors = [e for e in app.inputs.events if e.kind == "error"]
        assert errors and "test says no" in errors[0].text


@pytest.mark.parametrize("key", ["k", "n", "b"])
async def test_actions_not_built_yet_say_so_and_do_nothing(key: str) -> None:
    harness = Harness()
    async with harness.app.run_test() as pilot:
        await pilot.press(key)
        assert harness.notes and harness.notes[-1][1].startswith("unavailable:")
        assert harness.probes == []


async def test_window_and_pause_change_what_is_shown() -> None:
    app = Harness().app
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        await pilot.pause()
        await pilot.press("w")
        assert app.inputs.short_window
        await pilot.press("w", "p")
        await pilot.pause()
        assert not app.inputs.short_window
        assert app.query_one(HeaderPane).view.state == "paused"
        shown = app.query_one(SloPane).view
        changed = dataclasses.replace(
            SNAPSHOT, requests=dataclasses.replace(SNAPSHOT.requests, waiting=9.0)
        )
        app.post_message(SnapshotCollected(fresh(changed), LatencyTrend()))
        await pilot.pause()
        assert app.query_one(SloPane).view is shown  # paused: the panes hold still
        await pilot.press("p")
        await pilot.pause()
        assert app.views is not None and "waiting 9" in app.views.kv.queues


async def test_help_lists_every_key_and_the_palette_has_every_action() -> None:
    app = Harness().app
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for action in KEY_ACTIONS:
            assert action.description in text
        await pilot.press("escape")
        titles = [command.title for command in app.get_system_commands(app.screen)]
        for action in KEY_ACTIONS:
            assert any(title.startswith(action.label + " [") for title in titles), action


def _quick_sweep_settings() -> Settings:
    return settings_from_mapping(
        {
            "replica": {"scrape_interval_s": 0.01},
            "sweep": {
                "concurrency": [1, 2],
                "warmup_s": 0,
                "dwell_s": 0.02,
                "max_dwell_s": 0.05,
                "min_requests": 1,
            },
        },
        "test",
    )


async def test_a_sweep_asks_drives_the_probe_and_ends_with_the_load_off() -> None:
    harness = Harness(_quick_sweep_settings())
    app = harness.app
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        summary = str(app.screen.query_one("#confirm-summary").render())
        assert "concurrency 1, 2" in summary and "Cap: at most 2 in flight" in summary
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        result = app.inputs.sweep_result
        assert result is not None and result.stop is not None
        assert not app.inputs.sweeping
        assert harness.probes and all(probe.stopped for probe in harness.probes)
        kinds = [e.kind for e in app.inputs.events]
        assert kinds.count("sweep") == 2
        assert app.views is not None and app.views.curve.note.startswith("sweep")


async def test_a_sweep_over_the_operator_load_says_so_and_stops_it_first() -> None:
    harness = Harness(_quick_sweep_settings())
    app = harness.app
    async with app.run_test() as pilot:
        await pilot.press("l", "y")
        await app.workers.wait_for_complete()
        operator_probe = harness.probes[0]
        await pilot.press("s")
        assert isinstance(app.screen, ConfirmScreen)
        summary = str(app.screen.query_one("#confirm-summary").render())
        assert "Your load is stopped first" in summary
        await pilot.press("y")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert operator_probe.stopped
        assert len(harness.probes) > 1  # the sweep started its own
        assert app.inputs.sweep_result is not None and not app.inputs.sweeping


async def test_a_replica_that_stops_answering_turns_the_header_stale_by_the_clock() -> None:
    now = [FROZEN_NOW_S]
    app = SlotopApp(Settings(), clock=lambda: now[0])
    async with app.run_test() as pilot:
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        await pilot.pause()
        assert app.query_one(HeaderPane).view.state == "fresh"
        now[0] += 30.0  # no poll came back for 30 s: the poller is stuck on a hung replica
        app._tick()
        await pilot.pause()
        header = app.query_one(HeaderPane).view
        assert header.state == "stale" and "no answer for 30s" in header.freshness


async def test_the_dials_of_a_restartable_replica_sharpen_the_diagnosis() -> None:
    from pathlib import Path

    from slotop.actions.replica.spec import Dials, LaunchSpec
    from slotop.actions.slo import Binding
    from slotop.tui.restarting import RestartAccess
    from tests.support.tui_fakes import with_load

    class Target:
        url = "http://127.0.0.1:8000"
        dials = Dials("auto", 16, None)
        last_downtime_s = None

    spec = LaunchSpec(url=Target.url, command=("true",), state_path=Path("unused.json"))
    access = RestartAccess(Target(), spec, "managed")  # type: ignore[arg-type]
    app = SlotopApp(Settings(), clock=lambda: FROZEN_NOW_S, restart_access=lambda: access)
    async with app.run_test() as pilot:
        busy = with_load(SNAPSHOT, running=16, waiting=5, usage=0.3)
        app.post_message(SnapshotCollected(fresh(busy), LatencyTrend()))
        await pilot.pause()
        assert app.inputs.limits == (16, None)
        assert app.views is not None and app.views.diagnosis.binding is Binding.SEQ_CAP


@pytest.mark.parametrize("width", [80, 120, 140, 155, 156, 160, 200])
async def test_the_slo_table_never_wraps_at_common_widths(width: int) -> None:
    """Panes sit side by side only where the SLO pane keeps room for its table.

    A row is name 9 + target 10 + server 10 + client 10, three spaces and "  gap!": 48 columns.
    """
    app = Harness().app
    async with app.run_test(size=(width, 40)) as pilot:
        app.post_message(SnapshotCollected(fresh(SNAPSHOT), LatencyTrend()))
        pane = app.query_one(SloPane)
        # the layout settles when the app gets to it: later than one pause on a busy machine
        await wait_until(pilot, lambda: pane.size.width >= 48, 10.0, what=f"{pane.size}")


async def test_an_sglang_replica_is_shown_in_its_own_words() -> None:
    snapshot = capture_snapshot("sglang-0.5.23-cpu-load.txt")
    snapshot = dataclasses.replace(
        snapshot, replica=dataclasses.replace(snapshot.replica, version="0.5.23")
    )
    harness = Harness()
    app = harness.app
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(SnapshotCollected(fresh(snapshot), LatencyTrend()))
        await pilot.pause()
        assert app.views is not None
        words = " ".join(part.text for part in app.views.header.who)
        assert "SGLang 0.5.23" in words
        where = " ".join(part.text for part in app.views.header.where)
        assert "4,096 tokens" in where and "block" not in where
        kv = app.views.kv
        assert kv.blocks.startswith("1,116 / 4,096 tokens") and kv.preemptions.startswith("retract")
        assert app.views.latency.phases.startswith("prefill, decode: SGLang has no such metric")
        # a dump does not say the server's dtypes or cap: the line says what would change it
        assert kv.fp8_budget == (
            "with fp8_e5m2: 4.0 seqs at context, 8,192 tokens "
            "(×2 unless capped, auto taken as 16-bit)"
        )
        # as its /get_server_info says: float32, held at --max-total-tokens 4096
        said = dataclasses.replace(
            snapshot.replica, kv_cache_dtype="auto", model_dtype="float32", kv_tokens_cap=4096
        )
        app.post_message(
            SnapshotCollected(fresh(dataclasses.replace(snapshot, replica=said)), LatencyTrend())
        )
        await pilot.pause()
        assert app.views.kv.fp8_budget == (
            "with fp8_e5m2: 2.0 seqs at context, 4,096 tokens (×1, held at --max-total-tokens)"
        )
