"""The replay's feed: what the live feed would have posted at each moment of a recording.

`ReplayFeed` stands where the live `Feed` stands (the app's source): a thread reads the
recording into frames ahead of the position (`ReplayFrames`), follows the transport, and posts
one `ReplayMoved` each time the dashboard should change, carrying the very messages the feed and
the flows posted live (SnapshotCollected, GpuCollected, ProbeUpdated, CurveUpdated,
TimelineNoted, DialsApplied, SweepUpdated) and the before/after. Moving on posts the newest of
each kind heard since the last move and every timeline entry; a jump (back, or far ahead) resets
the dashboard and posts the newest of each kind and the last timeline entries. Nothing here
touches a widget.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable

from textual.message import Message

from slotop.actions.experiment.model import DialPairs
from slotop.actions.session.reader import SessionFormatError
from slotop.tui.messages import (
    CurveUpdated,
    DialsApplied,
    GpuCollected,
    ProbeUpdated,
    SnapshotCollected,
    TimelineNoted,
)
from slotop.tui.replay.changes import ChangeShown
from slotop.tui.replay.clock import ReplayTransport
from slotop.tui.replay.frames import LATEST_KINDS, Frame, PollFrame, ReplayFrames
from slotop.tui.sweeping import SweepUpdated
from slotop.tui.views.inputs import EVENTS_KEPT

WAKE_S = 0.05
"""How often the feed's thread looks at the transport when nothing wakes it."""
LINES_PER_TURN = 2000
"""Lines read into frames at a time (the keys wait at most that long for the frames)."""
LINES_PER_KEY = 16
"""Lines a key reads at a time when it steps past what is read (a poll is a few lines)."""
READING_POST_S = 0.5
"""While a long read goes on (a jump far ahead), how often the dashboard is told how far it is."""


class BeforeAfterReplayed(Message):
    """The before/after the dashboard showed from here (its state, and which restart)."""

    def __init__(self, shown: ChangeShown) -> None:
        super().__init__()
        self.shown = shown


class ReplayMoved(Message):
    """The replay moved: the messages the dashboard heard since (after a reset, when `reset`),
    where it is, how many frames it has heard then, when the newest poll was heard, and a
    problem reading the recording (or "")."""

    def __init__(
        self,
        messages: tuple[Message, ...],
        *,
        reset: bool,
        at_s: float,
        count: int,
        poll_at_s: float | None,
        reading: bool,
        problem: str = "",
    ) -> None:
        super().__init__()
        self.messages = messages
        self.reset = reset
        self.at_s = at_s
        self.count = count
        self.poll_at_s = poll_at_s
        self.reading = reading
        self.problem = problem


def frame_message(frames: ReplayFrames, frame: Frame) -> Message:
    """The message the dashboard heard for a frame."""
    kind, value = frame.kind, frame.value
    if kind == "poll":
        assert isinstance(value, PollFrame)
        return SnapshotCollected(value.result, frames.trend(value))
    if kind == "gpu":
        return GpuCollected(value)
    if kind == "probe":
        return ProbeUpdated(value.get())
    if kind == "curve":
        return CurveUpdated(*value)
    if kind == "event":
        return TimelineNoted(value)
    if kind == "dials":
        dials, since = value
        return DialsApplied(dials, since)
    if kind == "sweep":
        return SweepUpdated(*value)
    return BeforeAfterReplayed(value)


def messages_between(frames: ReplayFrames, heard: int, count: int) -> tuple[Message, ...]:
    """What moving from `heard` frames to `count` brings: the newest of each kind, every entry."""
    newest: dict[str, Frame] = {}
    entries: list[Frame] = []
    for frame in frames.frames[heard:count]:
        if frame.kind == "event":
            entries.append(frame)
        else:
            newest[frame.kind] = frame
    ordered = sorted(newest.values(), key=lambda f: f.at_s)
    return tuple(frame_message(frames, f) for f in (*ordered, *entries))


def messages_at(frames: ReplayFrames, count: int) -> tuple[Message, ...]:
    """What a dashboard reset to the first `count` frames needs: the newest of each kind, the
    last timeline entries."""
    kept = [frame for kind in LATEST_KINDS if (frame := frames.latest(kind, count)) is not None]
    state = tuple(frame_message(frames, f) for f in sorted(kept, key=lambda f: f.at_s))
    entries = tuple(TimelineNoted(event) for event in frames.events(count, EVENTS_KEPT))
    return state + entries


class ReplayFeed:
    """Posts a recording's frames as the transport moves; the app's source in a replay.

    A thread reads the recording ahead of the position, a few thousand lines at a time, and
    posts; the keys move the transport through `step`, `mark`, `seek` and `moved`. The frames are
    read under a lock, so a key never sees them half built.
    """

    def __init__(
        self,
        frames: ReplayFrames,
        transport: ReplayTransport,
        post: Callable[[Message], object],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.frames = frames
        self.transport = transport
        self._post = post
        self._clock = clock
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._jump = threading.Event()
        self._next_mark = threading.Event()
        self._thread: threading.Thread | None = None
        self._heard = 0
        self._shown_s: float | None = None
        self._problem = ""

    # the source, as the app sees it

    def start(self) -> None:
        """Start posting from the transport's position."""
        self._jump.set()
        self._thread = threading.Thread(target=self._run, name="slotop-replay", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (at once)."""
        self._stop.set()
        self._wake.set()

    def hold_records(self, hold: bool) -> None:
        """Nothing to hold: a recording's records were taken when it was made."""

    def open_configuration(self, dials: DialPairs, at_s: float) -> None:
        """Configurations open where the recording's `dials` actions say, not when told."""

    def forget_identity(self) -> None:
        """A recording's replica is never asked who it is."""

    # what the keys ask

    def moved(self, *, jump: bool = False) -> None:
        """The transport changed (play, pause, speed): post now; `jump` resets the dashboard."""
        if jump:
            self._jump.set()
        self._wake.set()

    def seek(self, t_s: float) -> None:
        """Go to `t_s` and pause there."""
        self.transport.pause()
        self.transport.seek(t_s)
        self.moved(jump=True)

    def step(self, polls: int) -> None:
        """Pause, then go `polls` polls of the replica forward (or back, when negative)."""
        self.transport.pause()
        at = self.transport.now()
        with self._lock:
            times = self.frames.poll_times_s
            if polls > 0:
                while not self.frames.done and bisect.bisect_right(times, at) + polls > len(times):
                    self.frames.build(LINES_PER_KEY)
                index = bisect.bisect_right(times, at) + polls - 1
                target = times[index] if index < len(times) else self.frames.read_s
            else:
                index = bisect.bisect_right(times, at) - 1 + polls
                target = times[index] if index >= 0 else self.transport.start_s
        self.transport.seek(target)
        self.moved(jump=polls < 0)

    def mark(self, direction: int) -> bool:
        """Pause, then go to the next (1) or previous (-1) timeline entry or action; whether
        there was one."""
        self.transport.pause()
        at = self.transport.now()
        with self._lock:
            marks = self.frames.mark_times_s
            if direction > 0:
                index = bisect.bisect_right(marks, at)
                if index >= len(marks) and not self.frames.done:
                    self._next_mark.set()  # not read yet: the thread reads on and goes there
                    self._wake.set()
                    return True
                target = marks[index] if index < len(marks) else None
            else:
                index = bisect.bisect_left(marks, at) - 1
                target = marks[index] if index >= 0 else None
        if target is None:
            return False
        self.transport.seek(target)
        self.moved(jump=direction < 0)
        return True

    # the thread

    def _run(self) -> None:
        while not self._stop.is_set():
            self._turn()
            self._wake.wait(WAKE_S)
            self._wake.clear()

    def _turn(self) -> None:
        frames, transport = self.frames, self.transport
        posted_at = self._clock()
        while not frames.done and not self._stop.is_set() and not self._problem:
            if self._next_mark.is_set():
                self._to_next_mark()
            elif frames.read_s > transport.now() + WAKE_S * transport.speed:
                break
            with self._lock:
                try:
                    frames.build(LINES_PER_TURN)
                except SessionFormatError as exc:
                    self._problem = str(exc)
                    transport.pause()
            transport.set_horizon(transport.end_s if frames.done else frames.read_s)
            if self._clock() - posted_at > READING_POST_S:
                self._post_now()
                posted_at = self._clock()
        if frames.done:
            transport.set_horizon(transport.end_s)
            self._to_next_mark()
            self._next_mark.clear()  # none after: it stays where it was
        self._post_now()

    def _to_next_mark(self) -> None:
        """Go to the first timeline entry or action read past the position, if one is."""
        marks = self.frames.mark_times_s
        index = bisect.bisect_right(marks, self.transport.now())
        if self._next_mark.is_set() and index < len(marks):
            self._next_mark.clear()
            self.transport.seek(marks[index])

    def _post_now(self) -> None:
        """Post what changed since the last post, as the transport stands."""
        with self._lock:
            frames = self.frames
            at_s = self.transport.now()
            count = frames.count_at(at_s)
            jump = self._jump.is_set() or count < self._heard
            self._jump.clear()
            if not jump and count == self._heard and at_s == self._shown_s:
                return
            messages = (
                messages_at(frames, count) if jump else messages_between(frames, self._heard, count)
            )
            poll = frames.latest("poll", count)
            self._heard, self._shown_s = count, at_s
            reading = not frames.done
        self._post(
            ReplayMoved(
                messages,
                reset=jump,
                at_s=at_s,
                count=count,
                poll_at_s=poll.at_s if poll is not None else None,
                reading=reading,
                problem=self._problem,
            )
        )
