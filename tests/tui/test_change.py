"""The before/after panel: a restart of a real (simulated) replica through k, then the panel says
how many of the new dials' requests have ended, and at enough shows the same table the headless
command prints, each delta marked against its noise; the recording holds each state the panel
showed, the table in the same words, and `slotop replay` shows each at the instant it was shown.

The replica is the simulated one, started and restarted by slotop (the stub command); the probe
is a fake whose load changes are steps, and the records the feed would take from a real one are
posted as it would post them, at times worked from the restart's own pause and resume.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slotop.actions.probe_control import ProbeControl, load_shape_from_settings
from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.report.build import build_report
from slotop.actions.restart.compare import Change
from slotop.actions.restart.live_record import before_after_from_json
from slotop.actions.restart.table import (
    comparison_table,
    format_comparison_text,
    table_from_json,
    table_lines,
)
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.collectors.probe.records import ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import ReplicaSettings, RestartSettings, Settings
from slotop.tui.app import SlotopApp
from slotop.tui.messages import LatencyTrend, ProbeRecordsArrived, SnapshotCollected
from slotop.tui.panes.change import ChangePane
from slotop.tui.replay.app import ReplayApp
from slotop.tui.restarting import RestartAccess
from tests.support.paths import STUB_REPLICA
from tests.support.pilot import wait_until
from tests.support.probe_steps import SteppingProbe, timed_request
from tests.support.tmux import Terminal
from tests.support.tui_fakes import capture_snapshot, fresh
from tests.support.vllm_replica import free_port

pytestmark = pytest.mark.anyio

GAPS = (0.025, 0.025, 0.025)


def _replica(tmp_path: Path) -> ManagedReplica:
    port = free_port()
    spec = LaunchSpec(
        url=f"http://127.0.0.1:{port}",
        command=(sys.executable, str(STUB_REPLICA), "--host", "127.0.0.1", "--port", str(port)),
        log_path=tmp_path / "replica.log",
        state_path=tmp_path / "state.json",
        health_timeout_s=30.0,
        stop_grace_s=2.0,
        drain_timeout_s=5.0,
    )
    return ManagedReplica(spec)


def _snapshot(name: str, at_s: float) -> SnapshotCollected:
    snapshot = dataclasses.replace(capture_snapshot(name), taken_at_s=at_s)
    return SnapshotCollected(fresh(snapshot, at_s), LatencyTrend())


def _arrived(
    records: list[ProbeRecord], probe: SteppingProbe, at_s: float, *streaming: float
) -> ProbeRecordsArrived:
    status = ProbeStatus(at_s, probe.steps[-1].step, "closed", 2, None, 0, 0, 0, 0, streaming)
    return ProbeRecordsArrived(tuple(records), tuple(probe.steps), status)


async def _until(pilot: Any, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    await wait_until(pilot, condition, timeout_s, step_s=0.1)


@pytest.mark.slow
async def test_a_restart_measures_then_shows_the_before_after(
    tmp_path: Path, no_strays: None
) -> None:
    replica = _replica(tmp_path)
    replica.start(Dials("auto", 64))
    now = time.time()
    probe = SteppingProbe(2, started_at_s=now - 30.0)
    settings = Settings(
        replica=ReplicaSettings(url=replica.url), restart=RestartSettings(min_requests=4)
    )
    control = ProbeControl(
        ProbeTarget(base_url=replica.url),
        load_shape_from_settings(settings.load),
        allow_remote_load=False,
        start_probe=lambda *_: probe,
    )
    control.apply(control.plan_start(concurrency=2))
    access = RestartAccess(replica, replica.spec, "managed")
    recorder = start_recording(command="attach", settings=settings, path=tmp_path / "s.jsonl")
    app = SlotopApp(
        settings, probe_control=control, restart_access=lambda: access, recorder=recorder
    )
    try:
        async with app.run_test(size=(160, 70)) as pilot:
            pane = app.query_one(ChangePane)
            assert not pane.display  # nothing to show before a restart
            # ten requests under the old dials, each 0.2 s long, the last sent a second ago
            before = [timed_request(0, now - 10.0 + i, 0.125, GAPS) for i in range(10)]
            app.post_message(_arrived(before, probe, now))
            app.post_message(_snapshot("vllm-0.32-cpu-idle.txt", now))
            await pilot.pause()

            await pilot.press("k")
            await pilot.press("down", "down", "down", "enter")  # auto, bfloat16, float16, fp8
            await pilot.press("y")
            await _until(pilot, lambda: app.inputs.before_after is not None)
            assert replica.dials == Dials("fp8", 64)
            assert pane.display and pane.view.measuring
            assert pane.view.status == "measuring: 0 of 4 requests with the new dials"
            assert "kv_cache_dtype auto → fp8, at 2 in flight" in str(pane.border_title)
            assert [c for kind, c in probe.calls if kind == "concurrency"] == [0, 2]

            resumed = probe.steps[-1].at_s
            after = [timed_request(2, resumed + i, 0.0625, GAPS) for i in range(6)]
            app.post_message(_arrived(after[:2], probe, resumed + 2.0, resumed + 2.0))
            await pilot.pause()
            assert pane.view.status == (
                "measuring: 2 of 4 requests with the new dials, over 1 of 2 s"
            )  # four requests, and twelve of their 0.1375 s lifetimes

            app.post_message(_arrived(after[2:4], probe, resumed + 4.5, resumed + 4.0))
            app.post_message(_snapshot("vllm-0.32-cpu-fp8-idle.txt", resumed + 5.0))
            await _until(pilot, lambda: not pane.view.measuring)
            state = app.inputs.before_after
            assert state is not None and state.comparison is not None
            table = state.comparison
            rows = {row.key: row for row in table.rows}
            # TTFT 125 ms before, 62.5 ms after, alike within each side: beyond any noise
            assert (rows["ttft_p50_s"].before, rows["ttft_p50_s"].after) == (0.125, 0.0625)
            assert rows["ttft_p50_s"].verdict is Change.BETTER
            assert rows["ttft_p99_s"].verdict is Change.NOISE_UNKNOWN  # four requests a side
            assert (rows["kv_blocks_total"].before, rows["kv_blocks_total"].after) == (256, 1024)
            assert rows["kv_blocks_total"].verdict is Change.BETTER
            assert rows["output_tokens_per_s"].noise.half_width is not None
            await pilot.pause()
            noted = [e.text for e in app.inputs.events if e.text.startswith("before/after")]
            assert len(noted) == 1 and noted[0].startswith("before/after at 2 in flight: ")
            assert "TTFT p50 better" in noted[0] and "KV blocks better" in noted[0]

            shown = pane.render().plain
            width = (pane.content_size.width - 3) // 2  # 160 columns: two halves, " │ " between
            for text in table_lines(comparison_table(table), width):
                assert text in shown  # the headless command's words, fitted to the panel
            assert shown.startswith("beyond the run-to-run noise: better TTFT p")
            pause_s = probe.steps[1].at_s

            frames = pane.frames
            app.post_message(_arrived(after[4:], probe, resumed + 7.0))
            app.post_message(_snapshot("vllm-0.32-cpu-fp8-idle.txt", resumed + 8.0))
            await pilot.pause()
            assert pane.frames == frames  # the table is kept: nothing to repaint

            await pilot.press("x")
            await pilot.pause()
            assert not pane.display and app.inputs.before_after is None
            await pilot.press("q")
    finally:
        replica.stop()
        recorder.close()

    actions = [
        line
        for line in read_recording(tmp_path / "s.jsonl").of_kind("action")
        if line.data["action"] == "before_after"
    ]
    states = [(a.data["state"], a.data.get("requests")) for a in actions]
    assert states == [
        ("measuring", 0),
        ("progress", 2),
        ("progress", 4),  # all ended, no snapshot of the replica since the last send yet
        ("progress", 4),  # now one: each side's span is known, the worker builds the table
        ("measured", 4),
        ("hidden", None),
    ]
    assert actions[2].data["after_span_s"] is None
    assert actions[3].data["after_span_s"] == [resumed, resumed + 3.0]
    measured = actions[4].data
    assert measured["changes"] == "kv_cache_dtype auto → fp8"
    assert (measured["load"], measured["mode"], measured["concurrency"]) == (
        "2 in flight",
        "closed",
        2,
    )
    assert measured["dials_before"]["kv_cache_dtype"] == "auto"
    assert measured["dials_after"]["kv_cache_dtype"] == "fp8"
    # before: the latest 4 of the old requests (sent 4, 3, 2, 1 s ago) up to the pause;
    # after: from the resume to the send of the 4th new request, 3 s later
    assert measured["before_span_s"] == [now - 4.0, pause_s]
    assert measured["after_span_s"] == [resumed, resumed + 3.0]
    rows = {cells[0]: cells for cells in measured["table"]["rows"]}
    assert rows["TTFT p50"][1:3] == ["125.0 ms", "62.5 ms"] and rows["TTFT p50"][-1] == "better"
    assert rows["TTFT p99"][-1] == "noise unknown"
    assert rows["KV blocks"][1:3] == ["256", "1,024"] and rows["KV blocks"][-1] == "better"
    recorded = table_from_json(measured["table"])
    for text in table_lines(recorded, width):
        assert text in shown  # the panel's lines, laid out again from the recording
    assert recorded.rows == comparison_table(table).rows  # the verdicts read back too
    assert measured["text"] == format_comparison_text(table)  # as slotop restart prints it
    assert {r["key"]: r["after"] for r in measured["comparison"]["rows"]}["ttft_p99_s"] == 0.0625
    read_back = before_after_from_json(measured)
    assert read_back is not None and not read_back.measuring and read_back.table == recorded

    report = build_report(read_recording(tmp_path / "s.jsonl"), "s.jsonl").markdown
    assert "### Restart 1: kv_cache_dtype auto → fp8" in report
    assert "Before/after at 2 in flight (the dashboard's panel" in report
    for cells in measured["table"]["rows"]:  # the panel's rows, in the report's table
        assert "| " + " | ".join(cells) + " |" in report

    recording = read_recording(tmp_path / "s.jsonl")
    replay = ReplayApp(recording, settings)
    async with replay.run_test(size=(160, 70)) as pilot:
        panel = replay.query_one(ChangePane)
        await _replayed_at(replay, pilot, actions[0].t_s - 0.001)
        assert not panel.display  # not yet shown
        await _replayed_at(replay, pilot, actions[0].t_s + 0.001)
        assert panel.display and panel.view.measuring
        assert panel.view.status == "measuring: 0 of 4 requests with the new dials"
        await _replayed_at(replay, pilot, actions[1].t_s + 0.001)
        assert panel.view.status.startswith("measuring: 2 of 4 requests with the new dials")
        await _replayed_at(replay, pilot, actions[4].t_s - 0.001)
        assert panel.view.measuring  # the table came later
        await _replayed_at(replay, pilot, actions[4].t_s + 0.001)
        assert not panel.view.measuring
        assert panel.render().plain == shown  # the panel reads as the live one did
        await _replayed_at(replay, pilot, actions[5].t_s + 0.001)
        assert not panel.display  # x hid it here
        await _replayed_at(replay, pilot, actions[1].t_s + 0.001)  # back again
        assert panel.display and panel.view.status.startswith("measuring: 2 of 4")


async def _replayed_at(replay: ReplayApp, pilot: Any, at_s: float) -> None:
    """Seek the replay to `at_s` and wait until the dashboard stands there."""
    feed = replay.replay_feed
    assert feed is not None
    feed.seek(at_s)
    await _until(pilot, lambda: replay.inputs.now_s == at_s)
    await pilot.pause()


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_demo_in_a_terminal_measures_a_restart_and_shows_the_table(tmp_path: Path) -> None:
    """The whole path: the real probe, the feed that hands its records on, the panel on screen."""
    config = tmp_path / "slotop.toml"
    config.write_text(
        "[load]\nprompt_tokens = 64\noutput_tokens = 16\n[restart]\nmin_requests = 10\n",
        encoding="utf-8",
    )
    command = (
        f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop demo --concurrency 2 "
        f"--config {config} --no-record; echo SLOTOP-EXITED-$?; sleep 120"
    )
    terminal = Terminal(command, width=160, height=90)
    try:
        terminal.wait_for(lambda s: "load ON" in s and "fresh" in s)
        assert "Before / after" not in terminal.screen()
        terminal.keys("k")
        terminal.wait_for(lambda s: "KV-cache dtype" in s and "fp8_e4m3" in s)
        terminal.keys("Down", "Down", "Down", "Enter")  # auto, bfloat16, float16, fp8
        terminal.wait_for(lambda s: "Restart the replica?" in s)
        terminal.keys("y")
        screen = terminal.wait_for(lambda s: "KV blocks" in s and "Before / after" in s)
        assert "auto → fp8, at 2 in flight" in screen
        headline = next(line for line in screen.splitlines() if "beyond the run-to-run" in line)
        assert "better" in headline and "KV blocks" in headline
        cells = [part for line in screen.splitlines() for part in line.strip("│ ").split(" │ ")]
        blocks = next(part for part in cells if part.startswith("KV blocks "))
        assert "exact" in blocks and blocks.rstrip().endswith("better")  # a half of the table
        assert "TTFT p99" in screen
        terminal.resize(160, 50)  # every pane on screen beside the panel
        titles = ("─ SLO ", "─ Latency ", "─ Curve ", "─ Litmus ", "─ GPU ", "─ KV cache ")
        screen = terminal.wait_for(
            lambda s: "beyond the run-to-run" in s and all(t in s for t in titles)
        )
        # The timeline keeps its two lines unless the panel carries notes (sides this short may
        # be told that the replica's rates cover more than they do): each note takes a line.
        if "│ note: " not in screen:
            assert "─ Events " in screen
        # every verdict whole in the real terminal (it was cut to "within noi" at this size);
        # "in noise" and "unknown" are the table's own shorter words for a narrow half
        assert "within noi" not in screen.replace("within noise", "")
        rows = [p for line in screen.splitlines() for p in line.strip("│ ").split(" │ ")]
        judged = [p.rstrip() for p in rows if p.startswith(("TTFT p50 ", "ITL p50 ", "KV blocks "))]
        words = ("better", "worse", "within noise", "in noise", "same", "noise unknown", "unknown")
        assert judged and all(p.endswith(words) for p in judged), judged
        terminal.resize(80, 24)  # the headline at the top, the rest a scroll away
        terminal.wait_for(lambda s: "beyond the run-to-run" in s and "─ SLO " not in s)
        terminal.keys("x")
        terminal.wait_for(lambda s: "Before / after" not in s)
        terminal.keys("q")
        terminal.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
    finally:
        terminal.close()
