"""`slotop fleet` in a real terminal (tmux), through a real Prometheus: 160×50 and 80×24.

Three simulated replicas scraped by Prometheus; the table shows each, with the buckets where the
screen is wide and without them where it is narrow; Enter opens one replica's dashboard fed from
Prometheus, q comes back to the table, and q again ends slotop. Scraped directly (`slotop fleet
URL URL URL`) at 80×24, each replica shows as host:port with its state, and its dashboard's
header names the whole URL.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.sim_fleet import SimFleet, run_sim_fleet
from tests.support.sim_replica import run_sim
from tests.support.tmux import Terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


@pytest.fixture(scope="module")
def fleet() -> Iterator[SimFleet]:
    yield from run_sim_fleet([[], [], []])


def _command(tmp_path: Path, fleet: SimFleet) -> str:
    # An empty working directory, so no stray folder named slotop shadows the package.
    return (
        f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop fleet "
        f"--prometheus {fleet.prometheus.url}; echo SLOTOP-EXITED-$?; sleep 120"
    )


def test_the_table_at_160_by_50_and_a_drill_in(tmp_path: Path, fleet: SimFleet) -> None:
    term = Terminal(_command(tmp_path, fleet), 160, 50)
    try:
        screen = term.wait_for(lambda s: all(i in s for i in fleet.instances) and "fresh" in s)
        assert "bucket ms" in screen and "preempt/s" in screen and "3 replicas, 1 model" in screen
        assert screen.count(" up ") >= 3  # each replica's state
        assert "Σ Qwen/Qwen2.5-0.5B-Instruct" in screen
        term.keys("Enter")
        dashboard = term.wait_for(lambda s: f"via {fleet.prometheus.url}" in s and "fresh" in s)
        assert "SLO" in dashboard and "KV cache" in dashboard
        term.keys("q")
        term.wait_for(lambda s: "3 replicas, 1 model" in s)
        term.keys("q")
        term.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
    finally:
        term.close()


def test_the_table_at_80_by_24(tmp_path: Path, fleet: SimFleet) -> None:
    term = Terminal(_command(tmp_path, fleet), 80, 24)
    try:
        screen = term.wait_for(lambda s: all(i in s for i in fleet.instances) and "fresh" in s)
        assert "bucket ms" not in screen and "TTFT p99" in screen and "ITL p99" in screen
        for line in screen.splitlines():
            assert len(line) <= 80
        term.keys("q")
        term.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
    finally:
        term.close()


def test_replicas_scraped_directly_at_80_by_24_show_host_port_and_state(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        urls = [stack.enter_context(contextlib.contextmanager(run_sim)()) for _ in range(3)]
        command = (
            f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop fleet "
            f"{' '.join(urls)}; echo SLOTOP-EXITED-$?; sleep 120"
        )
        term = Terminal(command, 80, 24)
        stack.callback(term.close)  # before the replicas stop
        hosts = [url.removeprefix("http://") for url in urls]
        screen = term.wait_for(lambda s: all(f" {h} " in s for h in hosts) and "fresh" in s)
        assert "http://" not in screen
        for line in screen.splitlines():
            assert len(line) <= 80
        rows = screen.splitlines()
        heading = next(row for row in rows if " replica " in row)
        state_at = heading.index(" state ") + 1
        for host in hosts:
            row = next(row for row in rows if f" {host} " in row)
            assert row[state_at:].split()[0] == "up", screen
        # The cursor is on the first row: its dashboard's header names the replica's whole URL.
        top = rows[rows.index(heading) + 1].split()[1]
        assert top in hosts
        term.keys("Enter")
        term.wait_for(lambda s: s.splitlines()[1].strip().startswith(f"http://{top}  "))
        term.keys("q")
        term.wait_for(lambda s: "3 replicas, 1 model" in s)
        term.keys("q")
        term.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
