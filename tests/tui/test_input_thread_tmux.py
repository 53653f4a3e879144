"""The input thread in a real terminal (tmux): asleep while no key comes, and keys still work.

Textual's own input thread wakes ten times a second for as long as the app runs. slotop's driver
waits on the terminal with no timeout while it is quiet. Counted here as the thread's voluntary
context switches (/proc/PID/task/TID/status), which a sleeping thread does not make: a 10 Hz
loop makes at least 10 a second, a quiet one none. Keys still work: `?` opens the help, a lone
Escape (told from an escape sequence only once the escape delay has passed, by the thread's beat
while keys come) closes it, a suspend and resume (SIGTSTP, SIGCONT) gives a new thread as quiet
that reads keys as well, and `q` quits at once, the thread leaving without a wake to wait for.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import pytest

from slotop.tui.textual_internals import THREAD_NAME
from tests.support.sim_replica import run_sim
from tests.support.tmux import Terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="counts a Linux thread's context switches"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

QUIET_S = 3.0
"""How long the input thread is watched for wakes while nothing is typed."""
SETTLE_S = 2.5
"""How long after the last input before watching: the thread's beat lasts 1.1 s after a byte."""


def _slotop_pid(tag: str) -> int:
    """The PID of the slotop process whose command line carries this test's tag."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            words = cmdline.read_bytes().split(b"\0")
            if words[1:3] == [b"-m", b"slotop"] and tag.encode() in words:
                return int(cmdline.parent.name)
    pytest.fail(f"no slotop process carries {tag}")


def _input_thread(pid: int) -> Path:
    for task in Path(f"/proc/{pid}/task").iterdir():
        if (task / "comm").read_text().strip() == THREAD_NAME:
            return task
    pytest.fail(f"slotop runs no thread named {THREAD_NAME}")


def _wakes(task: Path) -> int:
    for row in (task / "status").read_text().splitlines():
        if row.startswith("voluntary_ctxt_switches:"):
            return int(row.split()[1])
    pytest.fail(f"{task}/status has no voluntary_ctxt_switches")


def _wakes_over(task: Path, seconds: float) -> int:
    before = _wakes(task)
    time.sleep(seconds)
    return _wakes(task) - before


def test_the_input_thread_sleeps_while_quiet_and_keys_still_work(tmp_path: Path) -> None:
    with contextlib.ExitStack() as replica:
        url = replica.enter_context(contextlib.contextmanager(run_sim)())
        tag = f"{url}/"  # the same replica, named so only this test's process matches
        command = (
            f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop attach {tag}; "
            "echo SLOTOP-EXITED-$?; sleep 120"
        )
        term = Terminal(command)
        try:
            term.wait_for(lambda s: "fresh" in s)
            task = _input_thread(_slotop_pid(tag))
            time.sleep(SETTLE_S)  # the terminal's answers to the app's start-up queries are input
            assert _wakes_over(task, QUIET_S) <= 2  # a 10 Hz beat would make 30

            term.keys("?")
            term.wait_for(lambda s: "keys:" in s)
            term.keys("Escape")
            term.wait_for(lambda s: "keys:" not in s, timeout_s=5)

            time.sleep(SETTLE_S)  # the beat runs a second past the escape delay, then stops
            assert _wakes_over(task, QUIET_S) <= 2

            # Suspended and resumed (as a shell's job control does): the driver stops its input
            # thread and starts another, which is as quiet and reads keys as well.
            pid = _slotop_pid(tag)
            os.kill(pid, signal.SIGTSTP)
            time.sleep(1.0)
            os.kill(pid, signal.SIGCONT)
            time.sleep(SETTLE_S)  # resumed, the app asks the terminal again: its answers are input
            task = _input_thread(pid)
            assert _wakes_over(task, QUIET_S) <= 2
            term.keys("?")
            term.wait_for(lambda s: "keys:" in s, timeout_s=10)
            term.keys("Escape")
            term.wait_for(lambda s: "keys:" not in s, timeout_s=5)

            asked = time.monotonic()
            term.keys("q")
            term.wait_for(lambda s: "SLOTOP-EXITED-0" in s, timeout_s=10)
            assert time.monotonic() - asked < 5.0  # not held waiting for a wake that never comes
        finally:
            term.close()
