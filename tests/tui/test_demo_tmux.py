"""`slotop demo` in a real terminal (tmux): it draws, obeys keys, and quitting leaves no process."""

from __future__ import annotations

import re
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tmux import Terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    # An empty working directory: `python -m` puts it first on sys.path, so a stray folder named
    # slotop beside the checkout would otherwise shadow the installed package.
    command = (
        f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop demo --concurrency 2; "
        "echo SLOTOP-EXITED-$?; sleep 120"
    )
    term = Terminal(command)
    try:
        yield term
    finally:
        term.close()


def _sim_processes(port: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            words = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        text = " ".join(w.decode(errors="replace") for w in words)
        if "slotop.sim" in text and f"--port {port}" in text:
            found.append(text)
    return found


def _parent_of_sim(port: str) -> int:
    """The PID of the slotop process that started the demo's replica on this port."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if "slotop.sim" in text and f"--port {port}" in text:
                stat = (cmdline.parent / "stat").read_text()
                return int(stat[stat.rindex(")") + 2 :].split()[1])
        except OSError:
            continue
    raise AssertionError(f"no simulated replica on port {port}")


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_demo_draws_steps_helps_restarts_and_quits_cleanly(terminal: Terminal) -> None:
    screen = terminal.wait_for(lambda s: "load ON" in s and "fresh" in s and "PASS" in s)
    assert "SIMULATED replica" in screen
    assert "Llama-3.1-8B" in screen
    port = re.search(r"http://127\.0\.0\.1:(\d+)", screen)
    assert port is not None
    assert _sim_processes(port.group(1))

    terminal.keys("+")
    terminal.wait_for(lambda s: "Concurrency → 3" in s and "concurrency 3" in s)

    terminal.keys("?")
    terminal.wait_for(lambda s: "keys:" in s)
    terminal.keys("Escape")
    terminal.wait_for(lambda s: "keys:" not in s)

    terminal.keys("k")
    terminal.wait_for(lambda s: "KV-cache dtype" in s and "fp8_e4m3" in s)
    terminal.keys("Down", "Down", "Down", "Enter")  # auto, bfloat16, float16, fp8
    terminal.wait_for(lambda s: "Restart the replica?" in s and "auto → fp8" in s)
    terminal.keys("y")
    screen = terminal.wait_for(lambda s: "Restarted with the new dials, verified" in s)
    terminal.wait_for(lambda s: "KV fp8" in s)

    terminal.keys("q")
    terminal.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
    assert not _sim_processes(port.group(1))
    assert not _port_open(int(port.group(1)))


def test_closing_the_terminal_stops_the_demo_replica(terminal: Terminal) -> None:
    screen = terminal.wait_for(lambda s: "load ON" in s and "fresh" in s)
    port = re.search(r"http://127\.0\.0\.1:(\d+)", screen)
    assert port is not None
    assert _sim_processes(port.group(1))
    slotop_pid = _parent_of_sim(port.group(1))
    terminal.close()  # the SSH session ends: slotop gets SIGHUP
    deadline = time.monotonic() + 20.0
    while _sim_processes(port.group(1)):
        assert time.monotonic() < deadline, "the demo's replica outlived slotop"
        time.sleep(0.2)
    assert not _port_open(int(port.group(1)))
    while _alive(slotop_pid):
        assert time.monotonic() < deadline, "slotop itself kept running with no terminal"
        time.sleep(0.2)
