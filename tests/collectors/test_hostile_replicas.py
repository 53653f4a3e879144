"""Replicas of our own making that misbehave on loopback: every scrape of one comes back, within
the client's timeout and size cap, as a reading or an error that says what happened and what to
do; nothing it sends is kept past the cap, and no control character reaches a message."""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Callable

import pytest

from slotop.collectors.errors import CollectorError, MetricsParseError, ScrapeError
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot
from tests.support.hostile_replica import hostile_replica

MIB = 1024 * 1024
TIMEOUT_S = 0.5
PAGE_TIMEOUT_S = 5.0
"""How long a page of megabytes is waited for: a cap is checked there, not a clock."""
BIG_PAGES = ("endless", "huge")
NEVER_S = 30.0
"""A poll that has not come back by then is hung: far past any timeout the client was given."""


def _poll(monitor: ReplicaMonitor) -> Snapshot | CollectorError:
    """One poll in a thread of its own, so a hung poll fails the test instead of hanging it."""
    outcome: list[Snapshot | CollectorError] = []

    def run() -> None:
        try:
            outcome.append(monitor.poll())
        except CollectorError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(NEVER_S)
    assert outcome, f"the poll had not come back after {NEVER_S:g} s"
    return outcome[0]


def _monitor(url: str, cap_mib: float = 32, timeout_s: float = TIMEOUT_S) -> ReplicaMonitor:
    client = ReplicaClient(url, timeout_s=timeout_s, max_body_bytes=int(cap_mib * MIB))
    return ReplicaMonitor(client)


@pytest.mark.parametrize(
    ("kind", "cap_mib", "words"),
    [
        (
            "slow",
            32,
            "/metrics did not answer within 0.5 s (the whole answer, [replica] timeout_s)",
        ),
        ("hang", 32, "/metrics did not answer within 0.5 s"),
        ("drip", 32, "/metrics did not answer within 0.5 s"),
        ("endless", 4, "/metrics sent more than 4 MiB, the most slotop reads of one answer "),
        ("huge", 16, "sent more than 16 MiB (it announced 19.6 MiB), the most slotop reads"),
        ("garbage", 32, "not Prometheus text exposition format at line 2"),
        ("duplicate", 32, "appears twice; a /metrics body holds each series once"),
    ],
)
def test_each_bad_answer_is_an_error_that_says_what_happened(
    kind: str, cap_mib: float, words: str
) -> None:
    with hostile_replica(kind) as server:
        # a page of megabytes, where the cap is checked and not the clock, gets longer: read
        # slowly on a busy machine, the cap's error would turn into a timeout's
        monitor = _monitor(server.url, cap_mib, PAGE_TIMEOUT_S if kind in BIG_PAGES else TIMEOUT_S)
        for _ in range(2):  # and again, on the connection the first left behind
            outcome = _poll(monitor)
            assert isinstance(outcome, ScrapeError | MetricsParseError), outcome
            assert words in str(outcome)
            assert str(outcome).isprintable()
    if kind in ("endless", "huge"):
        assert "raise max_scrape_mb if it is right" in str(outcome)


def test_a_huge_page_within_the_cap_is_read_without_keeping_what_it_does_not_read() -> None:
    with hostile_replica("huge") as server:
        monitor = _monitor(server.url, 32, PAGE_TIMEOUT_S)
        first, second = _poll(monitor), _poll(monitor)
    assert isinstance(first, Snapshot) and isinstance(second, Snapshot)
    reading = monitor.window.latest
    assert reading is not None and reading.gauges["requests_running"]
    assert second.requests.running == 8.0  # the real page's figures, read past 50,000 series
    assert monitor._reader.parser._series.keys() and len(monitor._reader.parser._series) < 1_000


def test_counters_going_back_read_as_a_reset_never_as_a_negative_rate() -> None:
    with hostile_replica("backwards") as server:
        monitor = _monitor(server.url)
        snapshots = [_poll(monitor) for _ in range(4)]
    for snapshot in snapshots:
        assert isinstance(snapshot, Snapshot)
        for rate in (snapshot.window.generation_tokens_per_s, snapshot.window.prompt_tokens_per_s):
            assert rate is None or rate >= 0


def _peak_bytes(work: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_page_without_end_is_never_held_past_the_cap() -> None:
    with hostile_replica("endless") as server:
        monitor = _monitor(server.url, cap_mib=4)
        peak = _peak_bytes(lambda: _poll(monitor))
    assert peak < 12 * MIB  # the cap, and a copy of one read at most
