"""Rebuild what the live monitor showed from a recording, through the monitor's own code.

Each recorded reading is pushed into a `ReplicaMonitor` built with the recorded spans and
percentiles, at the recorded monotonic time, so the window, the quantiles and the Snapshot come
out as they did live: a replay's numbers are the live numbers, not an imitation of them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from slotop.actions.session.reader import Recording, SessionFormatError
from slotop.actions.session.readings import DecodedReading
from slotop.collectors.monitor import MonitorShape, ReplicaMonitor
from slotop.collectors.snapshot import Snapshot
from slotop.collectors.window import WindowView
from slotop.config import Settings, settings_from_mapping
from slotop.errors import ConfigError


@dataclass(frozen=True, slots=True)
class ReplayedPoll:
    """One poll replayed: the reading as recorded and the Snapshot the monitor built from it."""

    reading: DecodedReading
    snapshot: Snapshot


class SnapshotReplay:
    """Walks a recording's polls in order, holding the monitor (and its window) as it was then."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.monitor: ReplicaMonitor | None = None
        self._shape: MonitorShape | None = None

    def polls(self) -> Iterator[ReplayedPoll]:
        """Every poll, oldest first, each with the Snapshot the live monitor built at it."""
        url = str(self.recording.header.replica.get("url") or "")
        for shape, decoded in self.recording.readings():
            if shape is None:
                raise SessionFormatError(
                    f"{self.recording.source}: a reading comes before any monitor line; "
                    "the recording is damaged"
                )
            if shape is not self._shape or self.monitor is None:
                self._shape = shape
                self.monitor = ReplicaMonitor.replaying(url, shape)
            self.monitor.observe(decoded.mono_s, decoded.reading, decoded.info, decoded.notes)
            yield ReplayedPoll(decoded, self.monitor.snapshot(taken_at_s=decoded.t_s))

    def view(self, span_s: float) -> WindowView | None:
        """The monitor's window over the newest `span_s` at the poll last replayed."""
        return self.monitor.window.view(span_s) if self.monitor is not None else None


def snapshots(recording: Recording) -> Iterator[Snapshot]:
    """Every Snapshot the live monitor built, oldest first."""
    for poll in SnapshotReplay(recording).polls():
        yield poll.snapshot


def snapshot_at(recording: Recording, t_s: float) -> Snapshot | None:
    """The Snapshot the live monitor had built by Unix time `t_s`; None before the first poll."""
    found: Snapshot | None = None
    for poll in SnapshotReplay(recording).polls():
        if poll.reading.t_s > t_s:
            break
        found = poll.snapshot
    return found


_NAMED_KEY = re.compile(r"\[(\w+)\] (\w+)")
_NAMED_SECTION = re.compile(r"unknown section \[(\w+)\]")
_MOST_DROPPED = 50


def recorded_settings(recording: Recording) -> tuple[Settings, tuple[str, ...]]:
    """The settings the session ran with, read back from its header, and notes on any that
    this slotop cannot take (a section or key it does not know, a value it refuses): those
    keep their defaults, each named in a note."""
    recorded = recording.header.settings
    source = str(recorded.get("source") or recording.source)
    sections = {name: dict(table) for name, table in recorded.items() if isinstance(table, Mapping)}
    notes: list[str] = []
    for _ in range(_MOST_DROPPED):
        try:
            return settings_from_mapping(sections, source), tuple(notes)
        except ConfigError as exc:
            where = f"{recording.source}: the recorded settings: {exc}"
            section = _NAMED_SECTION.search(str(exc))
            key = _NAMED_KEY.search(str(exc))
            if section is not None and section.group(1) in sections:
                del sections[section.group(1)]
            elif key is not None and key.group(2) in sections.get(key.group(1), {}):
                del sections[key.group(1)][key.group(2)]
            else:
                break
            notes.append(f"{where}; the default is used")
    notes.append(f"{recording.source}: the recorded settings do not read back; defaults are used")
    return Settings(source=source), tuple(notes)
