"""Several probe workers read as one probe: records in order, one event per change, one status.

Each worker sends batches of its own records, events and status. The merger holds a record until
every worker has settled past its end (`ProbeStatus.settled_at_s`: no record still to come from it
ends earlier), so records come out in end order across workers, and until
the change that began its step has come out; it releases a change once every worker has applied
it, as one event stamped when the last one did, so a concurrency step moves every worker's share
at once as far as a reader can tell. The merged status adds the workers' counters up and counts a
held record as still streaming, so a wait on the status never misses a record it implies.

It also says when the probe turns client-bound (any worker's lag past the rule of `lag.py`) and
when it has caught up again (no worker bound for `CAUGHT_UP_S`), as events with the lag.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable

from slotop.collectors.probe.lag import CAUGHT_UP_S, judged_lag_s, status_words
from slotop.collectors.probe.records import (
    LOAD_STEP_KINDS,
    EventKind,
    ProbeBatch,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
    WorkerLag,
)
from slotop.collectors.probe.worker import cancelled_in, stopped_detail


def _merged(kind_events: Iterable[ProbeEvent]) -> ProbeEvent:
    """One event from every worker's copy: the first one's level, stamped at the last one's time."""
    events = list(kind_events)
    first = events[0]
    at_s = max(event.at_s for event in events)
    if first.kind is EventKind.STOPPED:
        cancelled = sum(cancelled_in(event.detail) for event in events)
        return ProbeEvent(at_s, first.kind, first.step, detail=stopped_detail(cancelled))
    return ProbeEvent(
        at_s,
        first.kind,
        first.step,
        first.mode,
        first.concurrency,
        first.rate_rps,
        first.burstiness,
        first.detail,
    )


def _settled_s(status: ProbeStatus) -> float:
    return status.at_s if status.settled_at_s is None else status.settled_at_s


class BatchMerger:
    """Merges the batches of `workers` probe workers; not thread-safe (the handle locks it)."""

    def __init__(self, workers: int) -> None:
        self._live = set(range(workers))
        self._latest: dict[int, ProbeStatus] = {}
        self._pending: dict[tuple[int, bool, str], dict[int, ProbeEvent]] = {}
        self._held: list[tuple[float, int, ProbeRecord]] = []
        self._order = itertools.count()
        self._level: ProbeEvent | None = None
        self._records: list[ProbeRecord] = []
        self._events: list[ProbeEvent] = []
        self._status: ProbeStatus | None = None
        self._status_stale = True
        self._bound = False
        self._last_bound_s = 0.0

    def add(self, worker: int, batch: ProbeBatch) -> None:
        """Take one batch of one worker."""
        for event in batch.events:
            key = (event.step, event.kind is EventKind.STOPPED, event.kind.value)
            self._pending.setdefault(key, {})[worker] = event
        for record in batch.records:
            heapq.heappush(self._held, (record.done_at_s, next(self._order), record))
        if batch.status is not None:
            self._latest[worker] = batch.status
        self._advance()

    def worker_ended(self, worker: int) -> None:
        """A worker sends no more: nothing waits for it from now on."""
        self._live.discard(worker)
        self._advance()

    def take(self) -> tuple[list[ProbeRecord], list[ProbeEvent]]:
        """The records and events released since the last take, each in order."""
        records, events = self._records, self._events
        self._records, self._events = [], []
        return records, events

    def status(self) -> ProbeStatus | None:
        """The probe's status: None until every worker has reported and its first change is out."""
        if self._status_stale:
            self._status = self._merged_status()
            self._status_stale = False
        return self._status

    def _advance(self) -> None:
        self._status_stale = True
        for key in sorted(self._pending):
            copies = self._pending[key]
            if not self._live <= copies.keys() and self._live:
                break  # a worker has yet to apply it (and every later change)
            del self._pending[key]
            event = _merged(copies[w] for w in sorted(copies))
            self._events.append(event)
            if event.kind in LOAD_STEP_KINDS:
                self._level = event
        self._release_records()
        self._judge_lag()

    def _watermark(self) -> float:
        if not self._live:
            return float("inf")
        if not self._live <= self._latest.keys():
            return float("-inf")
        return min(_settled_s(self._latest[w]) for w in self._live)

    def _release_records(self) -> None:
        watermark = self._watermark()
        step = self._level.step if self._level is not None else -1
        held = self._held
        while held and held[0][0] <= watermark and (held[0][2].step <= step or not self._live):
            self._records.append(heapq.heappop(held)[2])

    def _live_lags(self) -> list[WorkerLag]:
        return [lag for w in sorted(self._live) if w in self._latest for lag in self._latest[w].lag]

    def _judge_lag(self) -> None:
        status = self.status()
        if status is None or not self._live:
            return
        lags = self._live_lags()
        bound = any(lag.client_bound for lag in lags)
        if bound:
            self._last_bound_s = status.at_s
        if bound and not self._bound:
            self._bound = True
            self._events.append(
                ProbeEvent(
                    status.at_s,
                    EventKind.CLIENT_BOUND,
                    status.step,
                    detail=f"the probe is client-bound, its numbers bent: {status_words(lags)}",
                    lag_s=judged_lag_s(lags),
                )
            )
        elif self._bound and not bound and status.at_s - self._last_bound_s >= CAUGHT_UP_S:
            self._bound = False
            self._events.append(
                ProbeEvent(
                    status.at_s,
                    EventKind.CLIENT_CAUGHT_UP,
                    status.step,
                    detail=f"the probe keeps up again: {status_words(lags)}",
                    lag_s=judged_lag_s(lags),
                )
            )

    def _merged_status(self) -> ProbeStatus | None:
        level = self._level
        if level is None or not self._latest:
            return None
        if self._live and not self._live <= self._latest.keys():
            return None
        live = [self._latest[w] for w in sorted(self._live)]
        every = [self._latest[w] for w in sorted(self._latest)]
        streaming = [sent for status in live for sent in status.streaming_sent_at_s]
        streaming += [record.sent_at_s for _, _, record in self._held]
        closed = level.mode != "open"
        return ProbeStatus(
            at_s=min(s.at_s for s in live) if live else max(s.at_s for s in every),
            step=level.step,
            mode=level.mode or "closed",
            target_concurrency=level.concurrency if closed else None,
            rate_rps=None if closed else level.rate_rps,
            in_flight=sum(s.in_flight for s in live),
            sent_total=sum(s.sent_total for s in every),
            done_total=sum(s.done_total for s in every),
            failed_total=sum(s.failed_total for s in every),
            streaming_sent_at_s=tuple(sorted(streaming)),
            lag=tuple(self._live_lags()),
            openings_streaming=sum(s.openings_streaming for s in live)
            + sum(1 for _, _, record in self._held if record.opening),
            settled_at_s=min((_settled_s(s) for s in live), default=None),
        )
