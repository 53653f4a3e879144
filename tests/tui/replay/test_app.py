"""The replayed dashboard: its keys step, seek and speed up; the keys that change a replica are off.

The recording is made here by the real recorder and monitor, fed real /metrics captures on a
made-up clock: polls at whole seconds after START, a timeline entry between the third and the
fourth, so every position below is worked by hand.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slotop.actions.session.reader import parse_lines, read_recording
from slotop.actions.session.recorder import start_recording
from slotop.actions.session.taps import record_monitor
from slotop.collectors.monitor import ReplicaMonitor
from slotop.config import Settings
from slotop.tui.replay.app import ReplayApp
from slotop.tui.replay.clock import ReplayTransport
from slotop.tui.replay.feed import ReplayFeed
from slotop.tui.replay.frames import ReplayFrames
from slotop.tui.screens.help import HelpScreen
from tests.support.captured_replica import CapturedReplica
from tests.support.pilot import wait_until

pytestmark = pytest.mark.anyio

START = 1_800_000_000.0
POLLS = 6
EVENT_S = START + 3.5
END_S = START + POLLS + 0.25


class Clock:
    def __init__(self, t_s: float) -> None:
        self.t_s = t_s

    def __call__(self) -> float:
        return self.t_s


def _record(path: Path) -> Path:
    """Six polls at START + 1 .. START + 6 (idle, then loaded), an entry at START + 3.5."""
    wall, mono = Clock(START), Clock(500.0)
    recorder = start_recording(command="attach", settings=Settings(), path=path, clock=wall)
    replica = CapturedReplica("vllm-0.32-cpu-idle.txt", "vllm-0.32-cpu-load.txt")
    monitor = ReplicaMonitor(replica, clock=mono, wall_clock=wall)
    record_monitor(monitor, recorder)
    for second in range(1, POLLS + 1):
        wall.t_s, mono.t_s = START + second, 500.0 + second
        monitor.poll()
        if second == 3:
            recorder.event("load", "Concurrency → 3: 1 more requests go out at once.", EVENT_S)
    wall.t_s = START + POLLS + 0.25
    recorder.close()
    return path


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    return _record(tmp_path / "session.jsonl")


async def _until(pilot: Any, condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    await wait_until(pilot, condition, timeout_s, step_s=0.02, what="the replay never got there")


def _app(path: Path) -> ReplayApp:
    app = ReplayApp(read_recording(path), Settings())
    app.transport.pause()
    return app


def _shown_at(app: ReplayApp, t_s: float) -> bool:
    """Whether the dashboard shows the replay at `t_s`: the move there handled, not only the
    clock read (the header's tick reads it every second)."""
    return app.inputs.now_s == t_s and app.frames_shown == app.frames.count_at(t_s)


def _polled_at(app: ReplayApp) -> float | None:
    poll = app.inputs.poll
    return poll.value.taken_at_s if poll is not None and poll.value is not None else None


async def test_the_arrows_step_poll_by_poll_and_home_and_end_go_to_the_edges(
    recorded: Path,
) -> None:
    app = _app(recorded)
    async with app.run_test(size=(160, 50)) as pilot:
        await _until(pilot, lambda: app.views is not None)
        assert app.inputs.poll is None  # paused at the start, before the first poll
        await pilot.press("right")
        await _until(pilot, lambda: _polled_at(app) == START + 1)
        await pilot.press("right", "right")
        await _until(pilot, lambda: _polled_at(app) == START + 3)
        await pilot.press("left")
        await _until(pilot, lambda: _polled_at(app) == START + 2)
        await pilot.press("end")
        await _until(pilot, lambda: _shown_at(app, END_S))  # the `end` line
        assert _polled_at(app) == START + POLLS
        await pilot.press("home")
        await _until(pilot, lambda: _shown_at(app, START))
        assert app.inputs.poll is None


async def test_brackets_go_from_entry_to_entry(recorded: Path) -> None:
    app = _app(recorded)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("right_square_bracket")
        await _until(pilot, lambda: _shown_at(app, EVENT_S))
        assert [e.text for e in app.inputs.events][-1].startswith("Concurrency → 3")
        assert _polled_at(app) == START + 3
        await pilot.press("right_square_bracket")
        await pilot.pause(0.1)
        assert app.inputs.now_s == EVENT_S  # nothing after it
        await pilot.press("end", "left_square_bracket")
        await _until(pilot, lambda: _shown_at(app, EVENT_S))
        await pilot.press("left_square_bracket")
        await pilot.pause(0.1)
        assert app.inputs.now_s == EVENT_S


async def test_the_header_says_replay_where_how_fast_and_when_recorded(recorded: Path) -> None:
    app = _app(recorded)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("right", "right")
        await _until(pilot, lambda: _polled_at(app) == START + 2)
        header = app.views.header if app.views is not None else None
        assert header is not None and header.state == "replay"
        assert header.freshness.startswith("REPLAY paused 1×")
        assert "(0:02 of 0:06)" in header.freshness
        recorded_at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(START))
        assert header.cache.startswith(f"recorded {recorded_at} in {recorded}  ")
        assert "tiny-llama" in header.title
        await pilot.press("greater_than_sign", "greater_than_sign")
        await pilot.pause(0.1)
        assert app.transport.speed == 5.0
        await pilot.press("less_than_sign")
        await pilot.pause(0.1)
        assert app.transport.speed == 2.0


async def test_space_plays_at_the_chosen_speed_and_stops_at_the_end(recorded: Path) -> None:
    app = _app(recorded)
    async with app.run_test(size=(160, 50)) as pilot:
        for _ in range(3):
            await pilot.press("greater_than_sign")  # 10×: the six seconds in under one
        await pilot.press("space")
        await _until(pilot, lambda: _polled_at(app) == START + POLLS)

        def stopped_at_the_end() -> bool:
            replay = app.inputs.replay
            return replay is not None and not replay.playing and _shown_at(app, END_S)

        await _until(pilot, stopped_at_the_end)
        assert not app.transport.playing


async def test_go_to_takes_a_time_as_typed(recorded: Path) -> None:
    app = _app(recorded)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("g")
        await pilot.press(*"+0:04", "enter")
        await _until(pilot, lambda: _shown_at(app, START + 4))
        assert _polled_at(app) == START + 4
        await pilot.press("g")
        await pilot.press(*"soon", "enter")
        await pilot.pause(0.1)
        assert app.inputs.now_s == START + 4
        assert any("is no time in the recording" in str(n.message) for n in app._notifications)


async def test_the_keys_that_would_change_a_replica_are_off(recorded: Path) -> None:
    app = _app(recorded)
    async with app.run_test(size=(160, 50)) as pilot:
        toasts: dict[str, str] = {}  # gathered after each key: a toast expires on a slow machine
        for key in ("l", "plus", "minus", "s", "t", "k", "n", "b"):
            await pilot.press(key)
            await pilot.pause()
            assert len(app.screen_stack) == 1, f"{key} opened a prompt"
            toasts |= {n.identity: str(n.message) for n in app._notifications}
        said = list(toasts.values())
        assert len(said) == 8
        assert all(
            s == "unavailable in a replay: a recording cannot change the replica" for s in said
        )
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        assert "Play or pause the recording" in text
        assert "unavailable: replay: a recording cannot change the replica" in text


async def test_a_last_line_cut_short_is_a_note_on_the_timeline(recorded: Path) -> None:
    lines = recorded.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = recorded.with_name("cut.jsonl")
    cut.write_text("".join(lines[:-1]) + lines[-1][:20], encoding="utf-8")
    recording = read_recording(cut)
    assert recording.notes and not recording.ended
    assert parse_lines(lines[:-1]).lines == recording.lines
    app = ReplayApp(recording, Settings())
    app.transport.pause()
    async with app.run_test(size=(160, 50)) as pilot:
        await _until(pilot, lambda: bool(app.inputs.events))
        first = app.inputs.events[0]
        assert first.kind == "session"
        assert first.text == f"{cut}:{len(lines)}: the last line is cut short (20 characters, " + (
            "the writer was stopped mid-line); read up to the line before"
        )


def test_the_next_entry_past_what_is_read_is_found_by_reading_on(recorded: Path) -> None:
    frames = ReplayFrames(read_recording(recorded), Settings())
    transport = ReplayTransport(START, END_S, playing=False)
    posted: list[object] = []
    feed = ReplayFeed(frames, transport, posted.append)
    assert not frames.frames  # nothing read yet
    assert feed.mark(1)  # the feed's thread reads on until it finds one
    feed.start()
    try:
        deadline = time.monotonic() + 20.0
        while transport.now() != EVENT_S:
            assert time.monotonic() < deadline, "the replay never found the entry"
            time.sleep(0.02)
    finally:
        feed.stop()
    assert not transport.playing
