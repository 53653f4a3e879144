"""Following a measured window past its end, until every request sent before it has ended.

A request reports when it ends, so the records of those still streaming at a window's end arrive
later: both their latencies (when sent inside the window) and the tokens they delivered inside it
need them. The wait is bounded; the probe's status says which requests are still streaming, so
the wait ends as soon as none sent before the end is left, and says how many were cut when not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from slotop.collectors.probe.records import ProbeRecord, ProbeStatus


class RecordFeed(Protocol):
    """What following needs of the probe: its records so far and its latest status (`Probe`)."""

    def drain_records(self) -> list[ProbeRecord]: ...
    def status(self) -> ProbeStatus | None: ...


@dataclass(frozen=True, slots=True)
class Followed:
    """What the wait past a window's end collected, how long it took and what it left streaming.

    `requests_cut` counts requests sent by the end still streaming when the wait ran out; None
    when the probe said nothing after the end (its status is missing or older).
    """

    records: tuple[ProbeRecord, ...]
    followed_s: float
    requests_cut: int | None


def streaming_sent_by(status: ProbeStatus | None, end_s: float) -> int | None:
    """Requests sent by `end_s` still streaming at the status's time; None if it predates `end_s`."""
    if status is None or status.at_s < end_s:
        return None
    return sum(1 for sent_s in status.streaming_sent_at_s if sent_s <= end_s)


def follow_window(
    feed: RecordFeed,
    end_s: float,
    max_wait_s: float,
    *,
    clock: Callable[[], float],
    wait: Callable[[], None],
) -> Followed:
    """Drain records until none sent by `end_s` streams, or `max_wait_s` past it; `wait` paces it.

    The status is read before the drain: a batch carries the records that ended before its status,
    so a status that shows nothing left streaming comes with every record it implies.
    """
    records: list[ProbeRecord] = []
    while True:
        streaming = streaming_sent_by(feed.status(), end_s)
        records.extend(feed.drain_records())
        now = clock()
        if streaming == 0 or now - end_s >= max_wait_s:
            return Followed(tuple(records), max(0.0, now - end_s), streaming)
        wait()
