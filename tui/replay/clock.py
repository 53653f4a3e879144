"""The replay's transport: where in the recording it is, how fast it plays, and times typed by hand.

`ReplayTransport` is the clock a replayed dashboard reads: a position in the recording (Unix
seconds, as the recording stamps its lines) that moves at the chosen speed while it plays, stops
at the end, and never runs past what has been read of the recording (`horizon_s`). Keys and the
feed's thread both use it, so it takes a lock. `parse_position` reads a time as typed (`--at`,
the go-to prompt).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

SPEEDS: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0, 60.0)
"""The speeds < and > step through."""

POSITION_WORDS = (
    "start, end, +OFFSET from the start (+90, +1:30, +1:02:03), -OFFSET before the end (-30), "
    "or a clock time of the recording (10:15 or 10:15:30)"
)


class ReplayTransport:
    """Position, speed and play/pause of a replay, on a monotonic wall clock."""

    def __init__(
        self,
        start_s: float,
        end_s: float,
        *,
        at_s: float | None = None,
        speed: float = 1.0,
        playing: bool = True,
        wall: Callable[[], float] = time.monotonic,
    ) -> None:
        if not speed > 0:
            raise ValueError(f"the speed must be above 0, not {speed:g}")
        self.start_s = start_s
        self.end_s = max(end_s, start_s)
        self._wall = wall
        self._lock = threading.Lock()
        self._speed = speed
        self._playing = playing
        self._anchor_s = self._clamp(start_s if at_s is None else at_s)
        self._anchor_wall = wall()
        self._horizon_s = self.end_s

    def _clamp(self, t_s: float) -> float:
        return min(max(t_s, self.start_s), self.end_s)

    def _position(self) -> float:
        at = self._anchor_s
        if self._playing:
            at += (self._wall() - self._anchor_wall) * self._speed
        return min(self._clamp(at), max(self._horizon_s, self._anchor_s))

    def _hold(self, at_s: float) -> None:
        self._anchor_s, self._anchor_wall = at_s, self._wall()

    def now(self) -> float:
        """The position: a time in the recording; playing stops at its end."""
        with self._lock:
            at = self._position()
            if self._playing and at >= self.end_s:
                self._playing = False
                self._hold(at)
            return at

    @property
    def playing(self) -> bool:
        """Whether the position moves."""
        with self._lock:
            return self._playing and self._position() < self.end_s

    @property
    def speed(self) -> float:
        """Recording seconds per wall second."""
        return self._speed

    def set_horizon(self, read_s: float) -> None:
        """The recording has been read up to `read_s`: the position waits there."""
        with self._lock:
            self._hold(self._position())
            self._horizon_s = read_s

    def toggle(self) -> bool:
        """Play or pause; at the end, play starts again from the start. Whether it plays now."""
        with self._lock:
            at = self._position()
            if not self._playing and at >= self.end_s:
                at = self.start_s
            self._hold(at)
            self._playing = not self._playing
            return self._playing

    def pause(self) -> None:
        """Stop where it is."""
        with self._lock:
            self._hold(self._position())
            self._playing = False

    def seek(self, t_s: float) -> float:
        """Go to `t_s` (held within the recording); returns the position."""
        with self._lock:
            self._hold(self._clamp(t_s))
            return self._anchor_s

    def faster(self, steps: int) -> float:
        """Step the speed up (or down, for negative `steps`) through SPEEDS; returns it."""
        with self._lock:
            self._hold(self._position())
            below = [i for i, s in enumerate(SPEEDS) if s <= self._speed]
            index = below[-1] if below else 0
            self._speed = SPEEDS[min(max(index + steps, 0), len(SPEEDS) - 1)]
            return self._speed


_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d*)?))?$")


def _seconds(text: str) -> float:
    """`90`, `1:30`, `1:02:03` or `1:30.5` as seconds."""
    parts = text.split(":")
    if not 1 <= len(parts) <= 3 or not all(re.fullmatch(r"\d+(\.\d*)?", p) for p in parts):
        raise ValueError(text)
    total = 0.0
    for part in parts:
        total = total * 60 + float(part)
    return total


def parse_position(text: str, start_s: float, end_s: float) -> float:
    """A time in the recording as typed (POSITION_WORDS); ValueError says what it takes."""
    words = text.strip().lower()
    try:
        if words == "start":
            return start_s
        if words == "end":
            return end_s
        if words.startswith("+"):
            return start_s + _seconds(words[1:])
        if words.startswith("-"):
            return end_s - _seconds(words[1:])
        match = _CLOCK.match(words)
        if match is not None:
            hours, minutes = int(match.group(1)), int(match.group(2))
            seconds = float(match.group(3) or 0)
            if hours > 23 or minutes > 59 or seconds >= 60:
                raise ValueError(words)
            day = time.localtime(start_s)
            at = (
                time.mktime((day.tm_year, day.tm_mon, day.tm_mday, hours, minutes, 0, 0, 0, -1))
                + seconds
            )
            if at < start_s and at + 86400 <= end_s:
                at += 86400  # a recording that runs past midnight: that time the next day
            return at
    except ValueError:
        pass
    raise ValueError(f"{text.strip()!r} is no time in the recording; give {POSITION_WORDS}")
