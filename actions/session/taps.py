"""Connect what a session reads to its recorder: the monitor's polls and the probe's records.

`record_monitor` hooks a monitor's polls; `RecordingProbe` wraps a running probe so that whoever
drains it (the dashboard's feed, a sweep, a before/after measure) also records what it drained;
`RecordingGpu` records each GPU reading that changed.
"""

from __future__ import annotations

from typing import Protocol

from slotop.actions.probe_control import ProbeHandle, StartProbe
from slotop.actions.session.recorder import SessionRecorder
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stream import ProbeTarget


class GpuReaderLike(Protocol):
    """What a GPU tap needs of a reader (GpuReader, or a fake)."""

    def read(self) -> GpuSnapshot: ...

    def close(self) -> None: ...


def record_monitor(monitor: ReplicaMonitor, recorder: SessionRecorder | None) -> ReplicaMonitor:
    """Record the monitor's shape now and each of its polls from now on; returns the monitor."""
    if recorder is not None and recorder.recording:
        recorder.monitor(monitor.shape, monitor.client.base_url)
        monitor.on_poll = recorder.reading
    return monitor


class RecordingProbe:
    """A probe handle that records the records and events its caller takes from it."""

    def __init__(self, probe: ProbeHandle, recorder: SessionRecorder) -> None:
        self._probe = probe
        self._recorder = recorder
        self._events_seen = 0

    @property
    def running(self) -> bool:
        """Whether the probe still runs."""
        return self._probe.running

    def set_concurrency(self, concurrency: int) -> None:
        """Turn the closed-loop dial."""
        self._probe.set_concurrency(concurrency)

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        """Turn the open-loop dial."""
        self._probe.set_rate(rate_rps, burstiness)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the probe, then record the events it sent on its way out."""
        self._probe.stop(timeout_s)
        self._record_events(self._probe.events())

    def status(self) -> ProbeStatus | None:
        """The probe's latest counters."""
        return self._probe.status()

    def drain_records(self) -> list[ProbeRecord]:
        """Take the records that arrived (recording them), and record any new event."""
        records = self._probe.drain_records()
        self._record_events(self._probe.events())
        self._recorder.probe_records(records)
        return records

    def events(self) -> list[ProbeEvent]:
        """Every event so far (recording the new ones)."""
        events = self._probe.events()
        self._record_events(events)
        return events

    def wait_for_batch(self, timeout_s: float) -> bool:
        """Wait for the probe's first batch, where the wrapped probe can."""
        wait = getattr(self._probe, "wait_for_batch", None)
        return bool(wait(timeout_s)) if wait is not None else True

    def _record_events(self, events: list[ProbeEvent]) -> None:
        fresh = events[self._events_seen :]
        self._events_seen = max(self._events_seen, len(events))
        self._recorder.probe_events(fresh)


def recording_start(recorder: SessionRecorder | None) -> StartProbe:
    """A probe starter for `ProbeControl` whose probes record themselves (plain without one)."""

    def start(
        target: ProbeTarget, shape: LoadShape, concurrency: int | None, rate_rps: float | None
    ) -> ProbeHandle:
        probe = Probe.start(target, shape, concurrency=concurrency, rate_rps=rate_rps)
        if recorder is None or not recorder.recording:
            return probe
        return RecordingProbe(probe, recorder)

    return start


class RecordingGpu:
    """A GPU reader that records each reading that differs from the last but for its time."""

    def __init__(self, reader: GpuReaderLike, recorder: SessionRecorder) -> None:
        self._reader = reader
        self._recorder = recorder
        self._last: object = None

    def read(self) -> GpuSnapshot:
        """Read the GPUs, recording the reading when it changed."""
        snapshot = self._reader.read()
        seen = (snapshot.devices, snapshot.unavailable_cause)
        if seen != self._last:
            self._last = seen
            self._recorder.gpu(snapshot)
        return snapshot

    def close(self) -> None:
        """Release the reader."""
        self._reader.close()
