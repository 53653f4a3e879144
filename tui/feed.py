"""The feed: poll loops for the replica, the GPUs and the probe, off the UI thread.

Each source has its own Poller thread (never overlapping itself, waiting on a cancel event between
polls). They only build frozen values and hand them to `post`; nothing here touches a widget.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

from textual.message import Message

from slotop.actions.experiment.model import DialPairs
from slotop.actions.probe_control import ProbeControl
from slotop.actions.session.polls import ProbeState
from slotop.actions.session.recorder import SessionRecorder
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.history import History
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.poller import Poller, PollResult
from slotop.collectors.probe.lag import NO_CLIENT_ERRORS, WindowClientErrors
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeStatus
from slotop.collectors.reading import Reading
from slotop.collectors.snapshot import Snapshot
from slotop.slo import GoodputTargets
from slotop.tui.messages import (
    CurveUpdated,
    GpuCollected,
    LatencyTrend,
    ProbeRecordsArrived,
    ProbeUpdated,
    ProbeView,
    SnapshotCollected,
    TimelineEvent,
    TimelineNoted,
)
from slotop.tui.probe_tally import ProbeTally

TREND_POINTS = 240
_NOTED_PROBE_EVENTS = (
    EventKind.WORKER_EXITED,
    EventKind.CLIENT_BOUND,
    EventKind.CLIENT_CAUGHT_UP,
)
"""Probe events the timeline notes in words: the probe ended, or fell behind its reads, or caught up."""


class GpuSource(Protocol):
    """What the feed needs from a GPU reader (GpuReader, or a fake)."""

    def read(self) -> GpuSnapshot: ...

    def close(self) -> None: ...


class Source(Protocol):
    """What the app needs of whatever feeds it: the live Feed, or a replay of a recording."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def hold_records(self, hold: bool) -> None: ...

    def open_configuration(self, dials: DialPairs, at_s: float) -> None: ...

    def forget_identity(self) -> None: ...


_TREND_SERIES = (
    ("ttft_s", 50.0),
    ("ttft_s", 90.0),
    ("ttft_s", 99.0),
    ("itl_s", 50.0),
    ("itl_s", 90.0),
    ("itl_s", 99.0),
)
_TrendRow = tuple[float, tuple[float | None, ...]]  # taken at; one value per _TREND_SERIES


def _trend_row(snapshot: Snapshot) -> _TrendRow:
    """One snapshot's point of each trend series (short window when present)."""
    window = snapshot.short_window or snapshot.window
    values: list[float | None] = []
    for key, percentile in _TREND_SERIES:
        estimate = getattr(window, key).at(percentile)
        values.append(None if estimate is None else estimate.value)
    return snapshot.taken_at_s, tuple(values)


def _trend(rows: Iterable[_TrendRow]) -> LatencyTrend:
    kept = list(rows)
    columns = list(zip(*(values for _, values in kept), strict=True))
    if not columns:
        columns = [() for _ in _TREND_SERIES]
    return LatencyTrend(tuple(taken for taken, _ in kept), *columns)


def trend_of(snapshots: Sequence[Snapshot]) -> LatencyTrend:
    """Percentile series over these snapshots, oldest first (short window when present)."""
    return _trend(_trend_row(s) for s in snapshots)


class TrendRows:
    """The latency trend of a monitor's newest snapshots, kept as its history grows: each poll
    adds one row instead of reading every snapshot again."""

    def __init__(self, points: int = TREND_POINTS) -> None:
        self._rows: deque[_TrendRow] = deque(maxlen=points)
        self._last: Snapshot | None = None

    def trend(self, history: History[Snapshot]) -> LatencyTrend:
        """The trend over the newest `points` snapshots of `history`."""
        newer, continued = history.after(self._last)
        if not continued:
            self._rows.clear()
        self._rows.extend(_trend_row(s) for s in newer[-(self._rows.maxlen or 0) :])
        if newer:
            self._last = newer[-1]
        return _trend(self._rows)


def finished_total(reading: Reading | None) -> float | None:
    """The replica's cumulative finished-request count, for spotting a counter reset."""
    if reading is None:
        return None
    series = reading.counters.get("requests_finished")
    return sum(series.values()) if series else None


class Feed:
    """Runs the poll loops and posts what they find as messages."""

    def __init__(
        self,
        monitor: ReplicaMonitor,
        post: Callable[[Message], object],
        *,
        gpu: GpuSource | None = None,
        probe: ProbeControl | None = None,
        scrape_interval_s: float = 1.0,
        refresh_s: float = 1.0,
        long_window_s: float = 60.0,
        short_window_s: float = 10.0,
        slo_percentiles: tuple[float, float] = (99.0, 99.0),
        goodput_targets: GoodputTargets | None = None,
        clock: Callable[[], float] = time.time,
        recorder: SessionRecorder | None = None,
    ) -> None:
        self.monitor = monitor
        self.probe = probe
        self._post = post
        self._gpu = gpu
        self._clock = clock
        self._recorder = recorder
        self._was_stale: bool | None = None
        self._trend = TrendRows()
        self._last_finished: float | None = None
        self.tally = ProbeTally(
            long_window_s=long_window_s,
            short_window_s=short_window_s,
            slo_percentiles=slo_percentiles,
            goodput_targets=goodput_targets,
            opened_at_s=clock(),
        )
        self._probe_seen: tuple[int, int] = (0, 0)  # (id of the probe, events already read)
        self._probe_state: ProbeState | None = None
        self._curve_lock = threading.Lock()
        self._holding = threading.Event()
        self._last_gpu: object = None
        self._pollers: list[Poller[Any]] = [
            Poller(
                self._poll_replica,
                self._on_replica,
                interval_s=scrape_interval_s,
                name="slotop-replica",
            ),
        ]
        if gpu is not None:
            self._pollers.append(
                Poller(gpu.read, self._on_gpu, interval_s=refresh_s, name="slotop-gpu")
            )
        if probe is not None:
            self._pollers.append(
                Poller(self._poll_probe, self._on_probe, interval_s=refresh_s, name="slotop-probe")
            )

    def start(self) -> None:
        """Start every poll loop, and show the first configuration."""
        self._post_curve()
        for poller in self._pollers:
            poller.start()

    def stop(self) -> None:
        """Stop the loops, stop the probe if it runs, and release the GPU reader."""
        for poller in self._pollers:
            poller.stop(timeout_s=0)
        if self.probe is not None and self.probe.probe is not None:
            self.probe.probe.stop()
        if self._gpu is not None:
            self._gpu.close()

    def hold_records(self, hold: bool) -> None:
        """Leave the probe's records to someone else (a sweep) while `hold` is set."""
        if hold:
            self._holding.set()
        else:
            self._holding.clear()

    def note(self, kind: str, text: str) -> None:
        """Post a timeline entry stamped now."""
        self._post(TimelineNoted(TimelineEvent(self._clock(), kind, text)))

    def open_configuration(self, dials: DialPairs, at_s: float) -> None:
        """The replica runs with `dials` from `at_s` on: open a configuration (at start, and
        after each verified restart); records sent from then on land in it."""
        self.tally.open_configuration(dials, at_s)
        self._post_curve()

    def forget_identity(self) -> None:
        """Ask the replica who it is again on the next poll (after a restart)."""
        self.monitor.forget_identity()

    def _post_curve(self) -> None:
        """Post the current and the previous configuration's curves when they changed; posted
        under a lock, so curves told from two threads (a poll, a configuration opening) arrive
        in the order they changed and an older one never lands last."""
        with self._curve_lock:
            curves = self.tally.changed_curves()
            if curves is not None:
                self._post(CurveUpdated(*curves))

    def _poll_replica(self) -> Snapshot:
        snapshot = self.monitor.poll()
        total = finished_total(self.monitor.window.latest)
        if total is not None and self._last_finished is not None and total < self._last_finished:
            self.note("reset", "counters went back: the replica restarted")
            self.monitor.forget_identity()
        self._last_finished = total
        return snapshot

    def _on_replica(self, result: PollResult[Snapshot]) -> None:
        if self._was_stale is not None and result.stale != self._was_stale:
            if result.stale:
                self.note("down", f"replica not answering: {result.error}")
            else:
                self.note("up", "replica answering again")
        elif self._was_stale is None and result.stale:
            self.note("down", f"replica not answering: {result.error}")
        self._was_stale = result.stale
        if result.stale and self._recorder is not None:
            self._recorder.replica_failed(str(result.error), result.consecutive_failures)
        self._post(SnapshotCollected(result, self._trend.trend(self.monitor.history)))

    def _on_gpu(self, result: PollResult[GpuSnapshot]) -> None:
        gpu = result.value
        if gpu is None:
            return
        seen = (gpu.devices, gpu.unavailable_cause)
        if seen != self._last_gpu:  # a reading equal but for its time changes nothing on screen
            self._last_gpu = seen
            self._post(GpuCollected(gpu))

    def _poll_probe(self) -> ProbeView:
        control = self.probe
        handle = control.probe if control is not None else None
        now = self._clock()
        if handle is None:
            self._log_probe(now, "off")
            return self.tally.off(now)
        if self._holding.is_set():
            status = handle.status()
            self._log_probe(now, "held", status)
            return self.tally.held(status)
        seen_id, seen_count = self._probe_seen
        if seen_id != id(handle):
            seen_count = 0
        events = handle.events()
        fresh: list[ProbeEvent] = events[seen_count:]
        self._probe_seen = (id(handle), len(events))
        for event in fresh:
            if event.kind in _NOTED_PROBE_EVENTS:
                self.note("probe", event.detail)
        records = handle.drain_records()
        status = handle.status()
        view = self.tally.read(records, fresh, status, now)
        self._post_curve()
        if records or fresh:
            self._post(ProbeRecordsArrived(tuple(records), tuple(fresh), status))
        self._log_probe(now, "read", status, len(records), fresh, ProbeTally.clients(view))
        return view

    def _log_probe(
        self,
        now: float,
        state: ProbeState,
        status: ProbeStatus | None = None,
        records: int = 0,
        events: Sequence[ProbeEvent] = (),
        clients: WindowClientErrors = NO_CLIENT_ERRORS,
    ) -> None:
        """Record what this poll took, so a replay can take the same (an off probe once)."""
        if self._recorder is None or (state == "off" and self._probe_state == "off"):
            return
        self._probe_state = state
        self._recorder.probe_poll(now, state, status, records, events, clients)

    def _on_probe(self, result: PollResult[ProbeView]) -> None:
        if result.value is not None and not result.stale:
            view = result.value
            if self.tally.shown(view):
                self._post(ProbeUpdated(view))
        elif result.error:
            self.note("probe", f"probe reading failed: {result.error}")
