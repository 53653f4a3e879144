"""A recording turned back into what the dashboard was told, frame by frame, by the code that told it.

Each line of a dashboard's recording becomes the frames it stood for, in file order: a reading
is the snapshot the live monitor built (`SnapshotReplay`); a failed poll is the stale result; a
probe poll gives the feed's ProbeView and curves through the feed's own `ProbeTally`, with the
records and load steps that poll took; a `dials` action opens a configuration there; a GPU line,
a timeline entry, a sweep update (read back by the sweep's code) and a before/after panel (as
recorded) are what the app was handed then. Frames are
built once, forward only (the monitor's window and the tally are stateful), and kept: going back
is a look-up, never a second pass. Each frame's time is its line's, made strictly increasing so
that "the frames up to a time" is the order the dashboard heard them in.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from slotop.actions.experiment.model import dial_pairs
from slotop.actions.replica.spec import Dials
from slotop.actions.session.lines import decode_gpu, decode_probe_records
from slotop.actions.session.polls import FeedTakes
from slotop.actions.session.reader import Recording, SessionFormatError, SessionLine
from slotop.actions.session.rebuild import ReplayedPoll, SnapshotReplay
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.poller import PollResult
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings
from slotop.tui.feed import TREND_POINTS, trend_of
from slotop.tui.messages import ProbeView, TimelineEvent
from slotop.tui.probe_tally import Curves, ProbeTally
from slotop.tui.replay.changes import ChangeReplay
from slotop.tui.replay.sweeps import SweepReplay

FrameKind = Literal["poll", "gpu", "probe", "curve", "event", "dials", "sweep", "change"]
LATEST_KINDS: tuple[FrameKind, ...] = ("dials", "curve", "gpu", "poll", "probe", "sweep", "change")
"""The kinds where only the newest frame counts, in the order a jump hands them over."""
TICK_S = 1e-6
"""The least a frame's time moves past the one before it."""


@dataclass(frozen=True, slots=True)
class PollFrame:
    """A poll of the replica: its result, and how many snapshots there were by then (the trend)."""

    result: PollResult[Snapshot]
    snapshots: int


@dataclass(frozen=True, slots=True)
class Frame:
    """One thing the dashboard was told: when, from which line, what kind, and its value."""

    at_s: float
    line: int
    kind: FrameKind
    value: Any


class ReplayFrames:
    """Every frame of a recording, built forward on demand and kept."""

    def __init__(self, recording: Recording, settings: Settings) -> None:
        self.recording = recording
        slo = settings.slo
        self._tally = ProbeTally(
            long_window_s=settings.window.long_s,
            short_window_s=settings.window.short_s,
            slo_percentiles=(slo.ttft_percentile, slo.itl_percentile),
            goodput_targets=slo.goodput_targets,
            opened_at_s=recording.header.started_at_s,
        )
        self.frames: list[Frame] = []
        self.times_s: list[float] = []
        self.snapshots: list[Snapshot] = []
        self.poll_times_s: list[float] = []
        """When each poll of the replica was heard (fresh or failed), for stepping."""
        self.mark_times_s: list[float] = []
        """When each timeline entry and action was heard, for going event to event."""
        self._by_kind: dict[FrameKind, list[int]] = {}
        self._polls: Iterator[ReplayedPoll] = SnapshotReplay(recording).polls()
        self._next = 0
        self._last_good: Snapshot | None = None
        self._last_gpu: object = None
        self._takes = FeedTakes()
        self._changes = ChangeReplay()
        self._sweeps = SweepReplay(recording)

    # building

    @property
    def done(self) -> bool:
        """Whether every line has been read."""
        return self._next >= len(self.recording.lines)

    @property
    def read_s(self) -> float:
        """The time of the last line read (the header's start before any)."""
        lines = self.recording.lines
        return lines[self._next - 1].t_s if self._next else self.recording.header.started_at_s

    def build(self, lines: int) -> int:
        """Read up to `lines` more lines into frames; how many were read."""
        stop = min(self._next + lines, len(self.recording.lines))
        start = self._next
        while self._next < stop:
            line = self.recording.lines[self._next]
            self._next += 1
            try:
                self._read(line)
            except (KeyError, TypeError, ValueError) as exc:
                raise SessionFormatError(
                    f"{self.recording.source}:{line.line_number}: a {line.kind} line does not "
                    f"replay ({exc})"
                ) from None
        return self._next - start

    def build_until(self, t_s: float) -> None:
        """Read lines until one after `t_s` (or the end)."""
        lines = self.recording.lines
        while not self.done and lines[self._next].t_s <= t_s:
            self.build(1)

    def note(self, text: str) -> None:
        """A note of the replay's own (a line it read past) on the timeline, at the start."""
        at_s = self.recording.header.started_at_s
        self._add(SessionLine("note", at_s, 1, {}), "event", TimelineEvent(at_s, "session", text))

    def _add(self, line: SessionLine, kind: FrameKind, value: Any) -> None:
        at_s = line.t_s if not self.times_s else max(line.t_s, self.times_s[-1] + TICK_S)
        self._by_kind.setdefault(kind, []).append(len(self.frames))
        self.frames.append(Frame(at_s, line.line_number, kind, value))
        self.times_s.append(at_s)
        if kind == "poll":
            self.poll_times_s.append(at_s)
        elif kind in ("event", "dials", "sweep", "change"):
            self.mark_times_s.append(at_s)

    def _read(self, line: SessionLine) -> None:
        kind, data = line.kind, line.data
        if kind == "reading":
            self._reading(line)
        elif kind == "replica_failed":
            result = PollResult(
                self._last_good, True, str(data["error"]), line.t_s, None, int(data["failures"])
            )
            self._add(line, "poll", PollFrame(result, len(self.snapshots)))
        elif kind == "gpu":
            self._gpu(line, decode_gpu(data))
        elif kind == "probe_records":
            self._takes.recorded(decode_probe_records(data, self.recording.header.started_at_s))
        elif kind == "probe_poll":
            self._probe_poll(line)
        elif kind == "event":
            event = TimelineEvent(line.t_s, str(data["event"]), str(data["text"]))
            self._add(line, "event", event)
        elif kind == "action":
            self._action(line, data)

    def _reading(self, line: SessionLine) -> None:
        poll = next(self._polls)
        snapshot = poll.snapshot
        self.snapshots.append(snapshot)
        self._last_good = snapshot
        result = PollResult(snapshot, False, None, poll.reading.mono_s, poll.reading.mono_s, 0)
        self._add(line, "poll", PollFrame(result, len(self.snapshots)))

    def _gpu(self, line: SessionLine, gpu: GpuSnapshot) -> None:
        seen = (gpu.devices, gpu.unavailable_cause)
        if seen != self._last_gpu:  # as the feed: equal but for its time changes nothing
            self._last_gpu = seen
            self._add(line, "gpu", gpu)

    def _probe_poll(self, line: SessionLine) -> None:
        poll, records = self._takes.poll(line.data)
        if poll.state == "off":
            view = self._tally.off_polled(poll.t_s)
        elif poll.state == "held":
            view = self._tally.held_polled(poll.status)
        else:
            view = self._tally.read_polled(
                records, poll.events, poll.status, poll.t_s, poll.clients
            )
            self._curves(line, self._tally.changed_curves())
        self._add(line, "probe", view)  # its statistics are worked out when it is shown

    def _curves(self, line: SessionLine, curves: Curves | None) -> None:
        if curves is not None:
            self._add(line, "curve", curves)

    def _action(self, line: SessionLine, data: Mapping[str, Any]) -> None:
        action = data.get("action")
        if action == "dials":
            dials = Dials.from_json(data["dials"])
            since = data.get("since_s")
            self._add(line, "dials", (dials, since))
            at_s = float(since) if since is not None else line.t_s
            self._tally.open_configuration(dial_pairs(dials), at_s)
            self._curves(line, self._tally.changed_curves())
        elif action == "before_after":
            self._add(line, "change", self._changes.read(data))
        else:
            update = self._sweeps.read(str(action), data)
            if update is not None:
                self._add(line, "sweep", update)

    # reading back

    def count_at(self, t_s: float) -> int:
        """How many frames the dashboard had heard by `t_s`."""
        return bisect.bisect_right(self.times_s, t_s)

    def latest(self, kind: FrameKind, count: int) -> Frame | None:
        """The newest frame of `kind` among the first `count`."""
        indices = self._by_kind.get(kind, [])
        position = bisect.bisect_left(indices, count)
        return self.frames[indices[position - 1]] if position else None

    def events(self, count: int, keep: int) -> list[TimelineEvent]:
        """The newest `keep` timeline entries among the first `count` frames."""
        indices = self._by_kind.get("event", [])
        position = bisect.bisect_left(indices, count)
        return [self.frames[i].value for i in indices[max(0, position - keep) : position]]

    def trend_snapshots(self, poll: PollFrame) -> list[Snapshot]:
        """The snapshots the trend of this poll was drawn from (the last TREND_POINTS)."""
        return self.snapshots[max(0, poll.snapshots - TREND_POINTS) : poll.snapshots]

    def trend(self, poll: PollFrame) -> Any:
        """The latency trend the feed posted with this poll."""
        return trend_of(self.trend_snapshots(poll))

    def probe_view(self, count: int) -> ProbeView | None:
        """The probe's view among the first `count` frames (None before the first)."""
        frame = self.latest("probe", count)
        return frame.value.get() if frame is not None else None
