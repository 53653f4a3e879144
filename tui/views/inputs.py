"""What the dashboard knows at one instant: the newest data of every source and the operator's choices.

Every pane's view is built from one frozen `Inputs`; the helpers here pick the window and the
client statistics the operator chose and say whether the replica's data is stale.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from slotop import fmt
from slotop.actions.experiment.model import Configuration, ConfigurationCurve, CurvePoint
from slotop.actions.restart.live import BeforeAfter
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.poller import PollResult
from slotop.collectors.probe.stats import ProbeStats
from slotop.collectors.snapshot import Snapshot, WindowStats
from slotop.config import Settings
from slotop.tui.messages import LatencyTrend, ProbeView, TimelineEvent

EVENTS_KEPT = 200


STALE_AFTER_INTERVALS = 3.0


@dataclass(frozen=True, slots=True)
class ReplayHeader:
    """What the header says of a replay: the file, when it was recorded, its span, the speed,
    whether it plays, and whether part of it is still being read."""

    source: str
    recorded_at_s: float
    start_s: float
    end_s: float
    speed: float
    playing: bool
    reading: bool = False


@dataclass(frozen=True, slots=True)
class Inputs:
    """The newest data from every source and the operator's display choices."""

    settings: Settings
    now_s: float
    started_s: float
    poll: PollResult[Snapshot] | None = None
    last_poll_at_s: float | None = None
    trend: LatencyTrend = field(default_factory=LatencyTrend)
    gpu: GpuSnapshot | None = None
    probe: ProbeView = field(default_factory=lambda: ProbeView(running=False))
    curve: tuple[CurvePoint, ...] = ()
    """The current configuration's curve (the sweep's points apart)."""
    configuration: Configuration | None = None
    previous_curve: ConfigurationCurve | None = None
    curve_table: bool = False
    events: tuple[TimelineEvent, ...] = ()
    short_window: bool = False
    paused: bool = False
    simulated: bool = False
    sweep_progress: SweepProgress | None = None
    sweep_result: SweepResult | None = None
    sweeping: bool = False
    limits: tuple[int | None, int | None] = (None, None)
    before_after: BeforeAfter | None = None
    """The last restart's before/after at one load (None: none to show)."""
    unavailable: tuple[str, ...] = ()
    replay: ReplayHeader | None = None
    """Set when a recording is replayed: what the header says of it (now_s is its position)."""


def snapshot_of(inputs: Inputs) -> Snapshot | None:
    """The newest snapshot of the replica, None before the first scrape."""
    return inputs.poll.value if inputs.poll is not None else None


def chosen_window(inputs: Inputs) -> WindowStats | None:
    """The window the operator picked (`w`), None before the first scrape."""
    snapshot = snapshot_of(inputs)
    if snapshot is None:
        return None
    if inputs.short_window and snapshot.short_window is not None:
        return snapshot.short_window
    return snapshot.window


def chosen_probe_stats(inputs: Inputs) -> ProbeStats | None:
    """Client stats over the same window as the server's."""
    probe = inputs.probe
    return probe.short_stats if inputs.short_window else probe.long_stats


def stale_reason(inputs: Inputs) -> str | None:
    """Why the replica's data is stale (the last poll failed, or none answered for too long);
    None while it is fresh or before the first poll."""
    if inputs.poll is None:
        return None
    if inputs.poll.stale:
        return str(inputs.poll.error)
    age = inputs.now_s - (inputs.last_poll_at_s or inputs.now_s)
    limit = STALE_AFTER_INTERVALS * inputs.settings.replica.scrape_interval_s
    if age > limit + inputs.settings.replica.timeout_s:
        return f"no answer for {fmt.duration(age)}"
    return None
