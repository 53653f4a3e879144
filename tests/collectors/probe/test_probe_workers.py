"""Several probe workers against the simulated replica: shares, one event a change, lag, deaths."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from slotop.collectors.errors import ProbeError
from slotop.collectors.probe.handle import Probe, auto_workers
from slotop.collectors.probe.lag import CLIENT_ERROR_BOUND_S, client_error
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeRecord
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.probe.worker import Share
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow


def shape(workers: int | None, output_tokens: int = 24) -> LoadShape:
    return LoadShape(
        prompt_lengths=LengthDistribution("fixed", 32),
        output_lengths=LengthDistribution("fixed", output_tokens),
        max_concurrency=16,
        max_rate_rps=100.0,
        workers=workers,
    )


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    yield from run_sim()


def wait_until(probe: Probe, predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met; status {probe.status()}"
        probe.wait_for_batch(0.2)


@pytest.mark.parametrize(
    ("max_concurrency", "cores", "workers"),
    [
        (1, 8, 1),
        (64, 8, 1),  # 64 streams a worker
        (65, 8, 2),
        (512, 8, 8),
        (512, 2, 2),  # never more than the cores it may use
        (100_000, 200, 64),  # nor than the most a load may ask for
    ],
)
def test_auto_runs_a_worker_per_64_streams_up_to_the_cores(
    max_concurrency: int, cores: int, workers: int
) -> None:
    assert auto_workers(max_concurrency, cores) == workers


@pytest.mark.parametrize(
    ("total", "count", "parts"),
    [(10, 3, [4, 3, 3]), (2, 4, [1, 1, 0, 0]), (0, 2, [0, 0]), (7, 1, [7])],
)
def test_shares_differ_by_one_at_most_and_add_up(total: int, count: int, parts: list[int]) -> None:
    assert [Share(index, count).of(total) for index in range(count)] == parts


def test_a_load_asks_for_no_more_workers_than_streams() -> None:
    with pytest.raises(ProbeError, match="probe workers"):
        LoadShape(max_concurrency=2, workers=3)
    with pytest.raises(ProbeError, match="probe workers"):
        LoadShape(workers=0)


def test_two_workers_share_the_load_and_read_as_one_probe(sim_url: str) -> None:
    probe = Probe.start(ProbeTarget(sim_url), shape(2), concurrency=4)
    try:
        assert probe.workers == 2 and len(set(probe.pids)) == 2
        wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 4)
        probe.set_concurrency(7)
        wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 7)
        status = probe.status()
        assert status is not None and (status.step, status.target_concurrency) == (1, 7)
        assert len(status.lag) == 2
        records: list[ProbeRecord] = []
        deadline = time.monotonic() + 30
        while len(records) < 20:
            assert time.monotonic() < deadline, f"{len(records)} records so far"
            probe.wait_for_batch(0.2)
            records += probe.drain_records()
    finally:
        probe.stop()
    records += probe.drain_records()
    events = probe.events()
    kinds = [
        (e.kind, e.step, e.concurrency) for e in events if e.kind is not EventKind.CLIENT_BOUND
    ]
    assert kinds[:2] == [(EventKind.STARTED, 0, 4), (EventKind.CONCURRENCY_SET, 1, 7)]
    assert [e.kind for e in events].count(EventKind.CONCURRENCY_SET) == 1  # one event, 2 workers
    assert [e.kind for e in events].count(EventKind.STOPPED) == 1
    assert EventKind.WORKER_EXITED not in [e.kind for e in events]
    ids = [r.request_id for r in records]
    assert len(ids) == len(set(ids))
    assert {i % 2 for i in ids} == {0, 1}  # worker 0 sends even ids, worker 1 odd ones
    ends = [r.done_at_s for r in records]
    assert ends == sorted(ends)  # merged in the order they ended
    cancelled = sum(1 for r in records if r.error is ErrorClass.CANCELLED)
    stopped = next(e for e in events if e.kind is EventKind.STOPPED)
    said = re.fullmatch(r"(\d+) in-flight requests cancelled", stopped.detail)
    assert said is not None, stopped.detail
    # One event sums both workers' in-flight (4 of worker 0's, 3 of worker 1's): more than either
    # holds alone. Fewer than 7 where a request ended as the stop came, before its successor left;
    # and a request that ended while the stop was under way was counted but not cancelled.
    assert 4 < int(said[1]) <= 7 and cancelled <= int(said[1])


def test_open_loop_arrivals_are_split_between_workers_as_one_rate(sim_url: str) -> None:
    with Probe.start(ProbeTarget(sim_url), shape(2), rate_rps=40.0) as probe:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.sent_total >= 30)
        status = probe.status()
        assert status is not None and (status.mode, status.rate_rps) == ("open", 40.0)
    records = probe.drain_records()
    assert {r.request_id % 2 for r in records} == {0, 1}
    assert [e.kind for e in probe.events()].count(EventKind.STARTED) == 1


def test_a_worker_that_dies_ends_the_probe_and_says_which(sim_url: str) -> None:
    probe = Probe.start(ProbeTarget(sim_url), shape(2, output_tokens=400), concurrency=4)
    try:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 4)
        pid = probe.pids[1]
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_until(probe, lambda: probe.events()[-1].kind is EventKind.WORKER_EXITED)
        assert not probe.running
        last = probe.events()[-1]
        assert last.kind is EventKind.WORKER_EXITED
        assert f"worker 1 with exit code {-signal.SIGKILL}" in last.detail
    finally:
        probe.stop()
    assert not any(process.is_alive() for process in probe._processes)


@pytest.mark.skipif(sys.platform != "linux", reason="chunk arrival times come from Linux")
def test_a_stalled_worker_says_it_is_client_bound_with_its_lag(sim_url: str) -> None:
    probe = Probe.start(ProbeTarget(sim_url), shape(2, output_tokens=80), concurrency=4)
    try:
        wait_until(probe, lambda: (s := probe.status()) is not None and s.in_flight == 4)
        pid = probe.pids[0]
        assert pid is not None
        for _ in range(30):  # worker 0 is descheduled 40 ms in every 100: its chunks wait
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.04)
            os.kill(pid, signal.SIGCONT)
            time.sleep(0.06)
        wait_until(probe, lambda: any(e.kind is EventKind.CLIENT_BOUND for e in probe.events()))
    finally:
        os.kill(pid, signal.SIGCONT)
        probe.stop()
    bound = next(e for e in probe.events() if e.kind is EventKind.CLIENT_BOUND)
    assert bound.lag_s is not None and bound.lag_s > CLIENT_ERROR_BOUND_S  # what it added
    assert "client-bound" in bound.detail and "ITL p99 error" in bound.detail
    stalled = [r for r in probe.drain_records() if r.request_id % 2 == 0 and r.ok]
    error = client_error(stalled)
    assert error is not None and error.client_bound
    assert error.chunk_lag_max_s is not None and error.chunk_lag_max_s > 0.01
