"""`kill -9` of a real `slotop demo` in a real terminal loses at most the last second of its
recording, and what is left plays back."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from slotop.actions.session.reader import read_recording
from slotop.actions.session.rebuild import recorded_settings
from slotop.tui.replay.frames import ReplayFrames
from tests.support.tmux import Terminal
from tests.support.vllm_replica import live_descendants, still_alive

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

SLACK_S = 0.3
"""Scheduling slack on top of the one second: the writer's wait, a busy machine."""


def _slotop_pid(record: Path) -> int:
    """The slotop process that records to `record`."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"demo" in words and str(record).encode() in words:
            return int(cmdline.parent.name)
    raise AssertionError(f"no slotop process records to {record}")


def _count(record: Path, kind: str) -> int:
    try:
        return record.read_text(encoding="utf-8").count(f'"kind":"{kind}"')
    except OSError:
        return 0


def test_kill_9_of_the_dashboard_loses_at_most_the_last_second(tmp_path: Path) -> None:
    record = tmp_path / "killed.jsonl"
    command = (
        f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop demo --concurrency 2 "
        f"--model qwen2.5-0.5b --gpu l4 --record {record}; echo SLOTOP-EXITED-$?; sleep 120"
    )
    terminal = Terminal(command)
    below: list[int] = []
    try:
        terminal.wait_for(lambda s: "load ON" in s and "fresh" in s, timeout_s=90.0)
        deadline = time.monotonic() + 60.0
        while _count(record, "reading") < 5 or _count(record, "probe_records") < 3:
            assert time.monotonic() < deadline, "the demo recorded no load within a minute"
            time.sleep(0.1)
        pid = _slotop_pid(record)
        below = [p for p in live_descendants(pid) if p != pid]
        assert below, "the demo runs its replica and its probe below it"
        time.sleep(1.3)  # mid-way between two polls
        killed_at = time.time()
        os.kill(pid, signal.SIGKILL)
        terminal.wait_for(lambda s: "SLOTOP-EXITED-137" in s)
    finally:
        for orphan in still_alive(below):  # nothing stops the replica or the probe after -9
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan, signal.SIGKILL)
        terminal.close()

    recording = read_recording(record)
    assert not recording.ended
    assert killed_at - recording.last_t_s <= 1.0 + SLACK_S
    last_second = {line.kind for line in recording.lines if line.t_s > killed_at - 1.0 - SLACK_S}
    assert {"reading", "probe_poll"} <= last_second  # every poll was on its way to the file

    settings, notes = recorded_settings(recording)
    assert notes == ()
    frames = ReplayFrames(recording, settings)
    frames.build(len(recording.lines))
    assert frames.done
    assert len(frames.snapshots) >= 5
    probe = frames.probe_view(len(frames.frames))
    assert probe is not None and probe.running and probe.long_stats is not None
    assert probe.long_stats.requests_ok > 0
