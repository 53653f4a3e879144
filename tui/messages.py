"""Messages the feed posts to the app: frozen data going up, each newer one replacing a queued one.

Data messages answer `can_replace` for their own type, so a UI that falls behind skips straight to
the newest snapshot instead of replaying stale ones. Timeline notes are never dropped. The dials
the replica runs with (`DialsApplied`) are told by the restart and tune flows and by a replay
alike, so that message lives here too, with no flow to import.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from slotop.actions.experiment.model import ConfigurationCurve
from slotop.actions.replica.spec import Dials
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.poller import PollResult
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.probe.stats import ProbeStats
from slotop.collectors.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class LatencyTrend:
    """Recent server percentiles over the short window, one value per scrape, oldest first."""

    times_s: tuple[float, ...] = ()
    ttft_p50_s: tuple[float | None, ...] = ()
    ttft_p90_s: tuple[float | None, ...] = ()
    ttft_p99_s: tuple[float | None, ...] = ()
    itl_p50_s: tuple[float | None, ...] = ()
    itl_p90_s: tuple[float | None, ...] = ()
    itl_p99_s: tuple[float | None, ...] = ()


@dataclass(frozen=True, slots=True)
class ProbeView:
    """The probe as the screen needs it: state, counters, and client stats over both windows."""

    running: bool
    status: ProbeStatus | None = None
    long_stats: ProbeStats | None = None
    short_stats: ProbeStats | None = None
    errors: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    """One entry of the session's timeline: an action taken or a notable change seen."""

    at_s: float
    kind: str
    text: str


class SnapshotCollected(Message):
    """A poll of the replica ended (fresh, or stale with the reason)."""

    def __init__(self, result: PollResult[Snapshot], trend: LatencyTrend) -> None:
        super().__init__()
        self.result = result
        self.trend = trend

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, SnapshotCollected)


class GpuCollected(Message):
    """A reading of the GPUs (or why none is visible)."""

    def __init__(self, gpu: GpuSnapshot) -> None:
        super().__init__()
        self.gpu = gpu

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, GpuCollected)


class ProbeUpdated(Message):
    """The probe's newest state and client-side statistics."""

    def __init__(self, view: ProbeView) -> None:
        super().__init__()
        self.view = view

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, ProbeUpdated)


class CurveUpdated(Message):
    """A configuration opened, or its curve gained or changed a point: the current
    configuration's curve and the previous one's (None before there is one)."""

    def __init__(
        self, current: ConfigurationCurve | None, previous: ConfigurationCurve | None = None
    ) -> None:
        super().__init__()
        self.current = current
        self.previous = previous

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, CurveUpdated)


class ProbeRecordsArrived(Message):
    """Requests the feed took from the probe, the load steps that began, and its status; never
    dropped (each batch is new), so whoever gathers records (the before/after) misses none."""

    def __init__(
        self,
        records: tuple[ProbeRecord, ...],
        events: tuple[ProbeEvent, ...],
        status: ProbeStatus | None,
    ) -> None:
        super().__init__()
        self.records = records
        self.events = events
        self.status = status


class TimelineNoted(Message):
    """Something happened that belongs on the timeline."""

    def __init__(self, event: TimelineEvent) -> None:
        super().__init__()
        self.event = event


class DialsApplied(Message):
    """The replica runs with these dials now (after a restart, or as found at start); since
    `since_s` when known (a restart's `up` phase, before the probe resumed)."""

    def __init__(self, dials: Dials, since_s: float | None = None) -> None:
        super().__init__()
        self.dials = dials
        self.since_s = since_s
