"""The feed: poll loops for the replica, the GPUs and the probe, off the UI thread.

Each source has its own Poller thread (never overlapping itself, waiting on a cancel event between
polls). They only build frozen values and hand them to `post`; nothing here touches a widget.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol

from textual.message import Message

from slotop.actions.experiment.builder import ExperimentBuilder
from slotop.actions.experiment.model import ConfigurationCurve, DialPairs
from slotop.actions.probe_control import ProbeControl
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.poller import Poller, PollResult
from slotop.collectors.probe.records import EventKind, ProbeEvent
from slotop.collectors.probe.stats import GoodputTargets, RecordWindow
from slotop.collectors.reading import Reading
from slotop.collectors.snapshot import Snapshot
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

TREND_POINTS = 240


class GpuSource(Protocol):
    """What the feed needs from a GPU reader (GpuReader, or a fake)."""

    def read(self) -> GpuSnapshot: ...

    def close(self) -> None: ...


def latency_trend(monitor: ReplicaMonitor, points: int = TREND_POINTS) -> LatencyTrend:
    """Project the monitor's recent snapshots to percentile series (short window when present)."""
    items = list(monitor.history)[-points:]
    stats = [s.short_window or s.window for _, s in items]

    def series(key: str, percentile: float) -> tuple[float | None, ...]:
        out: list[float | None] = []
        for window in stats:
            estimate = getattr(window, key).at(percentile)
            out.append(None if estimate is None else estimate.value)
        return tuple(out)

    return LatencyTrend(
        times_s=tuple(s.taken_at_s for _, s in items),
        ttft_p50_s=series("ttft_s", 50.0),
        ttft_p90_s=series("ttft_s", 90.0),
        ttft_p99_s=series("ttft_s", 99.0),
        itl_p50_s=series("itl_s", 50.0),
        itl_p90_s=series("itl_s", 90.0),
        itl_p99_s=series("itl_s", 99.0),
    )


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
        goodput_targets: tuple[float, float] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.monitor = monitor
        self.probe = probe
        self._post = post
        self._gpu = gpu
        self._clock = clock
        self._long_s = long_window_s
        self._short_s = short_window_s
        self._percentiles = sorted({50.0, 90.0, 99.0, *slo_percentiles})
        self._targets = (
            GoodputTargets(ttft_s=goodput_targets[0], tpot_s=goodput_targets[1])
            if goodput_targets is not None
            else None
        )
        self._was_stale: bool | None = None
        self._last_finished: float | None = None
        self._records = RecordWindow(max(long_window_s, short_window_s))
        self._experiment = ExperimentBuilder(*slo_percentiles, self._targets)
        self._experiment_lock = threading.Lock()
        self._experiment.open_configuration((), clock())  # dials learnt when told
        self._last_curves: tuple[ConfigurationCurve | None, ...] | None = None
        self._probe_seen: tuple[int, int] = (0, 0)  # (id of the probe, events already read)
        self._errors: Counter[str] = Counter()
        self._last_probe_view: ProbeView | None = None
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
        with self._experiment_lock:
            self._experiment.open_configuration(dials, at_s)
        self._post_curve()

    def _post_curve(self) -> None:
        """Post the current and the previous configuration's curves when they changed."""
        with self._experiment_lock:
            experiment = self._experiment
            curves = (
                experiment.curve_of(experiment.current),
                experiment.curve_of(experiment.previous),
            )
            if curves == self._last_curves:
                return
            self._last_curves = curves
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
        self._post(SnapshotCollected(result, latency_trend(self.monitor)))

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
            self._records.evict(now)
            return ProbeView(running=False, errors=tuple(sorted(self._errors.items())))
        if self._holding.is_set():
            last = self._last_probe_view
            return ProbeView(
                running=True,
                status=handle.status(),
                long_stats=last.long_stats if last is not None else None,
                short_stats=last.short_stats if last is not None else None,
                errors=tuple(sorted(self._errors.items())),
            )
        seen_id, seen_count = self._probe_seen
        if seen_id != id(handle):
            seen_count = 0
        events = handle.events()
        fresh: list[ProbeEvent] = events[seen_count:]
        self._probe_seen = (id(handle), len(events))
        for event in fresh:
            if event.kind is EventKind.WORKER_EXITED:
                self.note("probe", event.detail)
        records = handle.drain_records()
        for record in records:
            if record.counts_as_failure and record.error is not None:
                self._errors[record.error.value] += 1
        self._records.add(records)
        self._records.evict(now)
        with self._experiment_lock:
            self._experiment.add_events(fresh)
            self._experiment.add_records(records)
        self._post_curve()
        status = handle.status()
        if records or fresh:
            self._post(ProbeRecordsArrived(tuple(records), tuple(fresh), status))
        return ProbeView(
            running=True,
            status=status,
            long_stats=self._records.stats(now, self._long_s, self._percentiles, self._targets),
            short_stats=self._records.stats(now, self._short_s, self._percentiles, self._targets),
            errors=tuple(sorted(self._errors.items())),
        )

    def _on_probe(self, result: PollResult[ProbeView]) -> None:
        if result.value is not None and not result.stale:
            view = result.value
            if view != self._last_probe_view:
                self._last_probe_view = view
                self._post(ProbeUpdated(view))
        elif result.error:
            self.note("probe", f"probe reading failed: {result.error}")
