"""The probe's own lag, and when it bends the numbers: the client-bound rule, in one home.

A probe worker is one event loop. When it has more to do than its core can, a chunk that reached
its socket waits before it is read and stamped, so TTFT and ITL grow by the client's delay, not the
replica's. Two measures say how far behind a worker runs:

- chunk lag: for each read, the time from the kernel's receive stamp of its bytes (SO_TIMESTAMPNS)
  to the probe's own stamp; observable on plain-HTTP replicas on Linux. A read that holds several
  chunks carries the stamp of its last, so a stall shows less in the lag than in the error below.
- loop delay: how late the worker's loop ran a timer that was due, counted from when the loop could
  first have run it (a loop that sat idle in select is not late), every `TICK_S`.

The rule works out what the chunk lag did to the numbers: each request's TTFT and gaps as measured,
and as they would read had every chunk been stamped when it arrived. A set of requests (a sweep
step, a window, a worker's last second) is client-bound when the lag moved its TTFT or ITL at the
percentile judged (p99 unless said) by more than `CLIENT_ERROR_BOUND_S`, the error the bench holds
the probe to against a paced replica's truth (bench/bench_probe.py). Where no arrival time is
observable, a worker is client-bound when the p99 of its loop delay is past the same bound.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from slotop.collectors.probe.records import ProbeRecord, WorkerLag

CLIENT_ERROR_BOUND_S = 0.001
"""The most the probe's own lag may move a TTFT or ITL percentile before its numbers are bent."""
TICK_S = 0.01
"""How often a worker measures its loop delay."""
SUMMARY_S = 1.0
"""The span each worker's lag summary covers: its status says how it ran over the last second."""
CAUGHT_UP_S = 5.0
"""A client-bound probe is said to have caught up after this long with no worker bound."""


def past_bound(error_s: float | None) -> bool:
    """Whether an error (or a p99 loop delay) is past the bound."""
    return error_s is not None and error_s > CLIENT_ERROR_BOUND_S


@dataclass(frozen=True, slots=True)
class ClientError:
    """How far the probe's own lag moved a set of requests' TTFT and ITL at the percentiles judged.

    Each error is the percentile as measured minus the percentile of the same requests had every
    chunk been stamped on arrival; None without samples. The chunk lag is over token chunks.
    """

    ttft_percentile: float
    itl_percentile: float
    ttft_error_s: float | None
    itl_error_s: float | None
    chunk_lag_p99_s: float | None
    chunk_lag_max_s: float | None
    chunks: int

    @property
    def client_bound(self) -> bool:
        """Whether the client bent these numbers past the bound."""
        return past_bound(self.ttft_error_s) or past_bound(self.itl_error_s)

    def words(self) -> str:
        """The errors and the lag behind them, in words."""
        return error_words(
            self.ttft_error_s,
            self.itl_error_s,
            self.chunk_lag_p99_s,
            self.ttft_percentile,
            self.itl_percentile,
        )


class WindowClientErrors(NamedTuple):
    """How far the probe's own lag moved its numbers over the long and the short window (None:
    not measured there), as a dashboard's probe view shows and a recording keeps them."""

    long_window: ClientError | None = None
    short_window: ClientError | None = None


NO_CLIENT_ERRORS = WindowClientErrors()
"""Neither window's client error measured (a probe poll without them, a recording's default)."""


def error_words(
    ttft_error_s: float | None,
    itl_error_s: float | None,
    chunk_lag_p99_s: float | None,
    ttft_percentile: float = 99.0,
    itl_percentile: float = 99.0,
) -> str:
    """'the client added TTFT p99 +0.40 ms, ITL p99 +2.10 ms (chunk lag p99 1.80 ms)'."""
    parts = [
        f"{label} p{percentile:g} {error * 1e3:+.2f} ms"
        for label, error, percentile in (
            ("TTFT", ttft_error_s, ttft_percentile),
            ("ITL", itl_error_s, itl_percentile),
        )
        if error is not None
    ]
    lag = f" (chunk lag p99 {chunk_lag_p99_s * 1e3:.2f} ms)" if chunk_lag_p99_s is not None else ""
    return f"the client added {', '.join(parts)}{lag}" if parts else ""


def _shift(measured: np.ndarray, arrived: np.ndarray, percentile: float) -> float | None:
    if not measured.size:
        return None
    found = np.percentile(measured, percentile) - np.percentile(arrived, percentile)
    return float(found)


@dataclass(frozen=True, slots=True)
class RecordArrays:
    """One record with its gaps as an array, and its chunk lags where `client_error` can use them,
    made once: statistics taken every second over a window pool arrays, not each record's floats."""

    record: ProbeRecord
    itl_s: np.ndarray
    lag_s: np.ndarray | None
    """Its chunk lags where they measure it: it ended well, with a TTFT and one lag per chunk."""


def arrays_of(record: ProbeRecord) -> RecordArrays:
    """The record with its gaps and usable chunk lags as float arrays."""
    lag = record.lag_s
    usable = (
        record.ok
        and lag is not None
        and record.ttft_s is not None
        and len(lag) == record.chunk_count
    )
    return RecordArrays(
        record,
        np.asarray(record.itl_s, dtype=float),
        np.asarray(lag, dtype=float) if usable else None,
    )


def client_error(
    records: Iterable[ProbeRecord], ttft_percentile: float = 99.0, itl_percentile: float = 99.0
) -> ClientError | None:
    """What the chunk lag did to the requests that ended well; None where none observed it."""
    return client_error_of([arrays_of(r) for r in records], ttft_percentile, itl_percentile)


def client_error_of(
    arrays: Sequence[RecordArrays], ttft_percentile: float = 99.0, itl_percentile: float = 99.0
) -> ClientError | None:
    """`client_error` of records already made arrays (`arrays_of`)."""
    chosen = [(a.record.ttft_s, a.itl_s, a.lag_s) for a in arrays if a.lag_s is not None]
    if not chosen:
        return None
    ttft = np.asarray([ttft for ttft, _, _ in chosen], dtype=float)
    ttft_lags = np.asarray([lag[0] for _, _, lag in chosen], dtype=float)
    gap = np.concatenate([gaps for _, gaps, _ in chosen])
    every_lag = np.concatenate([lag for _, _, lag in chosen])
    # each gap ends at a chunk read lag_i late and began at one read lag_(i-1) late; the
    # differences across two records' boundary (after each record's last lag) are not gaps
    ends = np.cumsum([lag.size for _, _, lag in chosen])
    moved = np.delete(np.diff(every_lag), ends[:-1] - 1)
    return ClientError(
        ttft_percentile=ttft_percentile,
        itl_percentile=itl_percentile,
        ttft_error_s=_shift(ttft, ttft - ttft_lags, ttft_percentile),
        itl_error_s=_shift(gap, gap - moved, itl_percentile),
        chunk_lag_p99_s=float(np.percentile(every_lag, 99)),
        chunk_lag_max_s=float(every_lag.max()),
        chunks=int(every_lag.size),
    )


def judged_lag_s(lags: Iterable[WorkerLag]) -> float | None:
    """What the rule judged, worst worker: the most its lag added to a p99 (TTFT or ITL), or its
    loop delay p99 where no arrival time was observable."""
    values = [
        _worst((lag.ttft_error_s, lag.itl_error_s))
        if lag.ttft_error_s is not None or lag.itl_error_s is not None
        else lag.loop_delay_p99_s
        for lag in lags
    ]
    return _worst(values)


def _worst(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def status_words(lags: Iterable[WorkerLag]) -> str:
    """The workers' lag on one line: the errors it made, chunk lag and loop delay p99 (worst
    worker's each)."""
    lags = list(lags)
    if not lags:
        return ""
    parts = []
    for label, value in (
        ("TTFT p99 error", _worst(lag.ttft_error_s for lag in lags)),
        ("ITL p99 error", _worst(lag.itl_error_s for lag in lags)),
        ("chunk lag p99", _worst(lag.chunk_lag_p99_s for lag in lags)),
        ("loop delay p99", _worst(lag.loop_delay_p99_s for lag in lags)),
    ):
        if value is not None:
            parts.append(f"{label} {value * 1e3:.2f} ms")
    workers = "1 worker" if len(lags) == 1 else f"{len(lags)} workers, worst"
    return f"{' · '.join(parts) or 'no lag measured yet'} ({workers})"


class TimedSelector(selectors.DefaultSelector):
    """The loop's selector, noting when each wait began and ended, so loop delay can leave the
    loop's idle time (and the timer's millisecond rounding) out."""

    entered_at = 0.0
    returned_at = 0.0

    def select(self, timeout: float | None = None) -> Any:
        self.entered_at = time.monotonic()
        ready = super().select(timeout)
        self.returned_at = time.monotonic()
        return ready


def _p99(values: list[float]) -> float | None:
    return float(np.percentile(values, 99)) if values else None


class LagMeter:
    """One worker's lag: loop delay from a timer every `TICK_S`, chunk lag from its reads, and
    what that lag did to the requests that ended.

    The reads append their lags to `chunk_lags` (a plain list, the cheapest thing per read) and
    ended requests are handed to `add`; every `SUMMARY_S` they become a `WorkerLag` and are
    forgotten.
    """

    def __init__(self, worker: int, selector: TimedSelector | None) -> None:
        self.worker = worker
        self.chunk_lags: list[float] = []
        self.loop_delays: list[float] = []
        self._records: list[ProbeRecord] = []
        self._selector = selector
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._since = time.monotonic()
        self._latest: WorkerLag | None = None

    def start(self) -> None:
        """Start the ticks on the running loop (whose clock is `time.monotonic`)."""
        self._loop = asyncio.get_running_loop()
        self._since = self._loop.time()
        self._arm(self._since + TICK_S)

    def add(self, record: ProbeRecord) -> None:
        """Take a request that ended, for the error its lag made."""
        self._records.append(record)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arm(self, due: float) -> None:
        assert self._loop is not None
        self._due = due
        self._timer = self._loop.call_at(due, self._tick)

    def _tick(self) -> None:
        now = time.monotonic()
        selector = self._selector
        ready_at = self._due
        if selector is not None and selector.entered_at < self._due:
            ready_at = max(self._due, selector.returned_at)  # idle until the wait ended: not late
        self.loop_delays.append(max(0.0, now - ready_at))
        self._arm(max(self._due + TICK_S, now))

    def summary(self) -> WorkerLag | None:
        """The latest summary; a new one once `SUMMARY_S` has passed since the last."""
        now = time.monotonic()
        span = now - self._since
        if span < SUMMARY_S and self._latest is not None:
            return self._latest
        chunk_lags = self.chunk_lags[:]
        self.chunk_lags.clear()  # in place: the worker's client holds this very list
        delays, self.loop_delays = self.loop_delays, []
        records, self._records = self._records, []
        self._since = now
        loop_p99 = _p99(delays)
        error = client_error(records)
        bound = error.client_bound if error is not None else past_bound(loop_p99)
        self._latest = WorkerLag(
            worker=self.worker,
            span_s=span,
            loop_delay_p99_s=loop_p99,
            loop_delay_max_s=max(delays) if delays else None,
            chunk_lag_p99_s=_p99(chunk_lags),
            chunk_lag_max_s=max(chunk_lags) if chunk_lags else None,
            reads=len(chunk_lags),
            ttft_error_s=error.ttft_error_s if error is not None else None,
            itl_error_s=error.itl_error_s if error is not None else None,
            client_bound=bound,
        )
        return self._latest
