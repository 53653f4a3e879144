"""The feed's poll threads: stale and back as data and as timeline notes, resets seen, hangs survived."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from slotop.collectors.errors import ScrapeError
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.replica import Health, Identity, Loads
from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.feed import Feed
from slotop.tui.messages import GpuCollected, SnapshotCollected, TimelineNoted
from tests.support.paths import CAPTURES

LOAD = (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8")
IDLE = (CAPTURES / "vllm-0.32-cpu-idle.txt").read_text(encoding="utf-8")


class FakeEndpoints:
    """A replica that answers each scrape from a script (the last entry repeats)."""

    base_url = "http://127.0.0.1:9"

    def __init__(self, script: list[str | Exception], gate: threading.Event | None = None) -> None:
        self._script = list(script)
        self._gate = gate
        self.scrapes = 0

    def metrics_text(self) -> str:
        if self._gate is not None:
            self._gate.wait()
        self.scrapes += 1
        item = self._script.pop(0) if len(self._script) > 1 else self._script[0]
        if isinstance(item, Exception):
            raise item
        return item

    def identity(self) -> Identity:
        return Identity("vllm", "0.32.0")

    def loads(self) -> Loads:
        raise ScrapeError("vLLM has no /v1/loads")

    def served_models(self) -> tuple[str, ...]:
        return ("tiny-llama",)

    def health(self) -> Health:
        return Health(True)


class FakeGpu:
    def __init__(self) -> None:
        self.closed = False

    def read(self) -> GpuSnapshot:
        return GpuSnapshot(0.0, unavailable_cause="no GPU in this test")

    def close(self) -> None:
        self.closed = True


def _wait_for(condition: Callable[[], bool], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the feed never got there"
        time.sleep(0.01)


def _feed(endpoints: FakeEndpoints, posted: list[object], gpu: FakeGpu | None = None) -> Feed:
    monitor = ReplicaMonitor(endpoints, interval_s=0.01, long_window_s=60.0, short_window_s=10.0)
    return Feed(monitor, posted.append, gpu=gpu, scrape_interval_s=0.01, refresh_s=0.01)


def _notes(posted: list[object]) -> list[str]:
    return [m.event.kind for m in list(posted) if isinstance(m, TimelineNoted)]


def test_a_replica_that_fails_then_answers_is_noted_down_then_up() -> None:
    posted: list[object] = []
    gpu = FakeGpu()
    feed = _feed(FakeEndpoints([ScrapeError("connection refused"), LOAD]), posted, gpu)
    feed.start()

    def snapshots() -> list[SnapshotCollected]:
        return [m for m in list(posted) if isinstance(m, SnapshotCollected)]

    try:
        # The "up" note is posted just before the snapshot that brings it: wait for both.
        _wait_for(
            lambda: (
                any(not m.result.stale for m in snapshots())
                and any(isinstance(m, GpuCollected) for m in posted)
            )
        )
    finally:
        feed.stop()
    assert _notes(posted)[:2] == ["down", "up"]
    first, answered = snapshots()[0], next(m for m in snapshots() if not m.result.stale)
    assert first.result.stale and "connection refused" in (first.result.error or "")
    assert answered.trend.ttft_p99_s  # the trend comes with the snapshot
    assert gpu.closed


def test_counters_going_back_are_noted_as_a_restart() -> None:
    posted: list[object] = []
    feed = _feed(FakeEndpoints([LOAD, LOAD, IDLE]), posted)
    feed.start()
    try:
        _wait_for(lambda: "reset" in _notes(posted))
    finally:
        feed.stop()


@pytest.mark.anyio
async def test_the_ui_stays_responsive_while_the_replica_hangs() -> None:
    gate = threading.Event()  # never set until the end: every scrape hangs
    endpoints = FakeEndpoints([LOAD], gate)

    def factory(post: Callable[..., object]) -> Feed:
        monitor = ReplicaMonitor(endpoints, interval_s=0.05)
        return Feed(monitor, post, scrape_interval_s=0.05, refresh_s=0.05)

    app = SlotopApp(Settings(), feed_factory=factory)
    try:
        async with app.run_test() as pilot:
            await pilot.press("p")
            await pilot.pause()
            assert app.inputs.paused
            assert app.views is not None and app.views.header.state == "waiting"
            await pilot.press("p", "w")
            await pilot.pause()
            assert not app.inputs.paused and app.inputs.short_window
            assert endpoints.scrapes == 0  # the scrape is still stuck, the keys were not
            await pilot.press("q")
    finally:
        gate.set()
