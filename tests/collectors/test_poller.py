"""The poll loop, the snapshot history and the replica monitor, with fakes and a frozen clock."""

from __future__ import annotations

import threading

import pytest

from slotop.collectors.errors import ScrapeError
from slotop.collectors.history import History
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.poller import Poller, PollResult
from slotop.collectors.replica import Health, Identity, Loads
from tests.support.paths import CAPTURES


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_failed_poll_keeps_the_last_good_value_marked_stale() -> None:
    clock = FakeClock()
    answers: list[object] = [1, ScrapeError("replica gone"), KeyError("bug"), 4]

    def poll() -> int:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, int)
        return answer

    poller: Poller[int] = Poller(poll, lambda result: None, interval_s=1.0, clock=clock)
    first = poller.poll_once()
    clock.now += 1
    second = poller.poll_once()
    clock.now += 1
    third = poller.poll_once()
    clock.now += 1
    fourth = poller.poll_once()
    assert (first.value, first.stale, first.error) == (1, False, None)
    assert (second.value, second.stale, second.error) == (1, True, "replica gone")
    assert second.last_good_at_s == 1000.0 and second.polled_at_s == 1001.0
    assert third.stale and third.error == "KeyError: 'bug'" and third.consecutive_failures == 2
    assert (fourth.value, fourth.stale, fourth.consecutive_failures) == (4, False, 0)


def test_loop_polls_without_overlap_and_stops_at_once() -> None:
    results: list[PollResult[int]] = []
    in_poll = threading.Lock()
    overlapped = threading.Event()
    third = threading.Event()
    count = 0

    def poll() -> int:
        nonlocal count
        if not in_poll.acquire(blocking=False):
            overlapped.set()
            return -1
        try:
            count += 1
            return count
        finally:
            in_poll.release()

    def on_result(result: PollResult[int]) -> None:
        results.append(result)
        if len(results) >= 3:
            third.set()

    poller: Poller[int] = Poller(poll, on_result, interval_s=0.001)
    poller.start()
    assert third.wait(10.0)
    poller.stop()
    assert not poller.running
    assert not overlapped.is_set()
    assert [r.value for r in results[:3]] == [1, 2, 3]


def test_stop_interrupts_a_long_wait() -> None:
    ran = threading.Event()
    poller: Poller[int] = Poller(lambda: 1, lambda r: ran.set(), interval_s=3600.0)
    poller.start()
    assert ran.wait(10.0)
    poller.stop(timeout_s=10.0)
    assert not poller.running


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Poller(lambda: 1, lambda r: None, interval_s=0)


def test_history_is_bounded_and_oldest_first() -> None:
    history: History[int] = History(3)
    for second in range(10):
        history.append(float(second), second * 10)
    assert list(history) == [(7.0, 70), (8.0, 80), (9.0, 90)]
    assert history.latest() == (9.0, 90)
    assert history.since(8.0) == [(8.0, 80), (9.0, 90)]
    assert history.series(lambda v: v / 10 if v > 70 else None) == [
        (7.0, None),
        (8.0, 8.0),
        (9.0, 9.0),
    ]
    with pytest.raises(ValueError):
        History(0)


class FakeReplica:
    """Serves captured bodies in turn; fails when told to."""

    base_url = "http://fake:8000"

    def __init__(self, bodies: list[str]) -> None:
        self.bodies = bodies
        self.fail_version = False

    def metrics_text(self) -> str:
        if not self.bodies:
            raise ScrapeError("http://fake:8000/metrics: cannot connect")
        return self.bodies.pop(0)

    def identity(self) -> Identity:
        if self.fail_version:
            raise ScrapeError("no /version")
        return Identity("vllm", "0.32.0")

    def loads(self) -> Loads:
        raise ScrapeError("vLLM has no /v1/loads")

    def served_models(self) -> tuple[str, ...]:
        return ("tiny-llama",)

    def health(self) -> Health:
        return Health(True)


def _body(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def test_monitor_builds_snapshots_with_rates_from_the_second_poll() -> None:
    clock = FakeClock()
    replica = FakeReplica([_body("vllm-0.32-cpu-load.txt"), _body("vllm-0.32-cpu-restart-a.txt")])
    monitor = ReplicaMonitor(replica, interval_s=1.0, clock=clock, wall_clock=lambda: 5.0)
    first = monitor.poll()
    clock.now += 4.0
    second = monitor.poll()
    assert first.window.generation_tokens_per_s is None
    assert first.replica.version == "0.32.0" and first.replica.healthy
    assert second.window.covered_s == 4.0
    assert second.window.generation_tokens_per_s is not None
    assert second.window.generation_tokens_per_s > 0
    assert len(monitor.history) == 2
    with pytest.raises(ScrapeError):
        monitor.poll()
    assert len(monitor.history) == 2


def test_monitor_notes_what_it_could_not_learn() -> None:
    replica = FakeReplica([_body("vllm-0.32-cpu-idle.txt")])
    replica.fail_version = True
    snapshot = ReplicaMonitor(replica).poll()
    assert snapshot.replica.version is None
    assert any("no /version" in note for note in snapshot.notes)


def test_monitor_window_is_sized_from_the_span_and_interval() -> None:
    clock = FakeClock()
    body = _body("vllm-0.32-cpu-idle.txt")
    replica = FakeReplica([body] * 200)
    monitor = ReplicaMonitor(
        replica, long_window_s=10, short_window_s=5, interval_s=1.0, clock=clock
    )
    for _ in range(200):
        monitor.scrape()
        clock.now += 1.0
    assert len(monitor.window) <= 12


def test_a_failing_result_handler_does_not_end_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    delivered: list[int] = []
    three = threading.Event()

    def on_result(result: PollResult[int]) -> None:
        assert result.value is not None
        delivered.append(result.value)
        if len(delivered) >= 3:
            three.set()
        if len(delivered) == 1:
            raise RuntimeError("receiver bug")

    counter = iter(range(1_000_000))
    poller: Poller[int] = Poller(lambda: next(counter), on_result, interval_s=0.001)
    poller.start()
    try:
        assert three.wait(10.0), "the loop stopped after the handler raised"
    finally:
        poller.stop()
    assert poller.callback_failures == 1
    assert "the poll result handler failed" in caplog.text
    assert delivered[:3] == [0, 1, 2]
