"""Reads a session recording back: checks its header and schema, and parses every line (pure).

A recording from a newer slotop (a schema version this one does not know) is refused with the
version it needs; a last line cut short (the writer was killed) is read past with a note; any
other line that is not a JSON object with a kind and a time is refused with the file and line.
A session recorded in parts (`NAME.jsonl`, `NAME.part2.jsonl`, …) is read as one, from its first
part, whichever part is named.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from slotop.actions.errors import ActionError
from slotop.actions.session.files import part_path
from slotop.actions.session.lines import (
    READABLE_VERSIONS,
    SCHEMA,
    SCHEMA_NAME,
    ProbeRows,
    decode_gpu,
    decode_probe_event,
    decode_probe_records,
)
from slotop.actions.session.readings import DecodedReading, ReadingDecoder, ReadingFormatError
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.monitor import MonitorShape
from slotop.collectors.probe.records import ProbeEvent


class SessionFormatError(ActionError):
    """A file that is not a session recording slotop can read; the message says where and why."""


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """The first line: schema, the slotop that wrote it, start time, command, settings, replica."""

    schema: str
    schema_version: int
    slotop_version: str | None
    started_at_s: float
    command: str
    settings: Mapping[str, Any]
    replica: Mapping[str, Any]
    part: int = 1
    first_part: str | None = None
    """A later part's header names the session's first file."""


@dataclass(frozen=True, slots=True)
class SessionLine:
    """One line after the header: its kind, its time (Unix seconds), where it was (line number,
    and the file when the session is in parts), all it holds."""

    kind: str
    t_s: float
    line_number: int
    data: Mapping[str, Any]
    source: str = field(default="", compare=False)

    def where(self, recording_source: str) -> str:
        """`FILE:LINE`, for a message about this line."""
        return f"{self.source or recording_source}:{self.line_number}"


@dataclass(frozen=True, slots=True)
class Recording:
    """A whole recording: the header, every line in file order, and what the reader noticed."""

    source: str
    header: SessionHeader
    lines: tuple[SessionLine, ...]
    notes: tuple[str, ...]
    parts: tuple[str, ...] = ()
    """The files read, first part first (empty when parsed from lines)."""

    @property
    def ended(self) -> bool:
        """Whether slotop closed the recording itself (an `end` line), not killed mid-write."""
        return any(line.kind == "end" for line in self.lines)

    @property
    def last_t_s(self) -> float:
        """Time of the last line (the header's start when there is none)."""
        return self.lines[-1].t_s if self.lines else self.header.started_at_s

    def of_kind(self, *kinds: str) -> Iterator[SessionLine]:
        """The lines of these kinds, in order."""
        return (line for line in self.lines if line.kind in kinds)

    def readings(self) -> Iterator[tuple[MonitorShape | None, DecodedReading]]:
        """Every recorded poll as its Reading, with the monitor shape it was built under."""
        decoder = ReadingDecoder()
        shape: MonitorShape | None = None
        for line in self.of_kind("monitor", "reading"):
            if line.kind == "monitor":
                shape = monitor_shape(line.data)
                continue
            try:
                yield shape, decoder.decode(line.data)
            except (ReadingFormatError, KeyError, TypeError, ValueError) as exc:
                raise SessionFormatError(f"{line.where(self.source)}: {exc}") from None

    def probe_rows(self) -> Iterator[ProbeRows]:
        """Every batch of probe records, times back on the Unix clock."""
        for line in self.of_kind("probe_records"):
            yield self._decoded(line, lambda d: decode_probe_records(d, self.header.started_at_s))

    def probe_events(self) -> Iterator[ProbeEvent]:
        """Every change of the probe's load."""
        for line in self.of_kind("probe_event"):
            yield self._decoded(line, decode_probe_event)

    def probe_line(self, line: SessionLine) -> ProbeRows | ProbeEvent:
        """A `probe_records` line as its rows, a `probe_event` line as its event."""
        if line.kind == "probe_event":
            event: ProbeEvent = self._decoded(line, decode_probe_event)
            return event
        rows: ProbeRows = self._decoded(
            line, lambda d: decode_probe_records(d, self.header.started_at_s)
        )
        return rows

    def gpu_snapshots(self) -> Iterator[GpuSnapshot]:
        """Every GPU reading."""
        for line in self.of_kind("gpu"):
            yield self._decoded(line, decode_gpu)

    def _decoded(self, line: SessionLine, decode: Any) -> Any:
        try:
            return decode(line.data)
        except (KeyError, TypeError, ValueError) as exc:
            raise SessionFormatError(
                f"{line.where(self.source)}: a {line.kind} line does not decode ({exc})"
            ) from None


def monitor_shape(data: Mapping[str, Any]) -> MonitorShape:
    """The monitor's spans and percentiles from a `monitor` line."""
    return MonitorShape(
        long_window_s=float(data["long_window_s"]),
        short_window_s=float(data["short_window_s"]),
        interval_s=float(data["interval_s"]),
        ttft_percentile=data.get("ttft_percentile"),
        itl_percentile=data.get("itl_percentile"),
    )


WHAT_A_RECORDING_IS = (
    f'A recording is JSON lines whose first line is its header ({{"schema": "{SCHEMA}", '
    '"started_at_s": ..., "command": ...}); the dashboard, slotop sweep, restart and tune write '
    "one per session into $XDG_STATE_HOME/slotop/sessions/ (~/.local/state/slotop/sessions/, "
    "or [session] folder), named YYYYMMDD-HHMMSS_HOST-PORT_COMMAND.jsonl, or where --record "
    "FILE said: `ls -t ~/.local/state/slotop/sessions | head` lists the newest"
)


def _not_a_recording(where: str, found: str) -> SessionFormatError:
    return SessionFormatError(
        f"{where}: not a slotop session recording (no {SCHEMA_NAME} header: its first line is "
        f"{found}). {WHAT_A_RECORDING_IS}"
    )


def _schema_version(schema: Any, where: str) -> int:
    name, _, version = str(schema).partition("/")
    if name != SCHEMA_NAME or not version.isdigit():
        found = "a JSON object without a schema" if schema is None else f"schema {schema!r}"
        raise _not_a_recording(where, found)
    number = int(version)
    if number not in READABLE_VERSIONS:
        newest = max(READABLE_VERSIONS)
        if number > newest:
            raise SessionFormatError(
                f"{where}: recorded with schema {schema}, newer than this slotop reads "
                f"({SCHEMA}); it needs a slotop that reads {schema}: upgrade slotop "
                "(pip install -U slotop) to read it"
            )
        raise SessionFormatError(
            f"{where}: recorded with schema {schema}, which this slotop no longer reads "
            f"(it reads {', '.join(f'{SCHEMA_NAME}/{v}' for v in READABLE_VERSIONS)}); "
            f"read it with the slotop that wrote it"
        )
    return number


def _header(data: Mapping[str, Any], where: str) -> SessionHeader:
    version = _schema_version(data.get("schema"), where)
    try:
        return SessionHeader(
            schema=str(data["schema"]),
            schema_version=version,
            slotop_version=data.get("slotop_version"),
            started_at_s=float(data["started_at_s"]),
            command=str(data["command"]),
            settings=MappingProxyType(dict(data.get("settings") or {})),
            replica=MappingProxyType(dict(data.get("replica") or {})),
            part=int(data.get("part") or 1),
            first_part=str(data["first_part"]) if data.get("first_part") else None,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise SessionFormatError(f"{where}: the header lacks or garbles {exc}") from None


def _object(text: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SessionFormatError(f"{where}: not a JSON line ({exc})") from None
    if not isinstance(data, dict):
        raise SessionFormatError(f"{where}: a {type(data).__name__}, not a JSON object")
    return data


def _start_of(text: str, chars: int = 40) -> str:
    line = text.strip()
    return line if len(line) <= chars else line[: chars - 1] + "…"


def parse_lines(lines: Iterable[str], source: str = "<recording>") -> Recording:
    """Parse a recording's lines (each with or without its newline) into a Recording."""
    texts = list(lines)
    notes: list[str] = []
    if texts and not texts[-1].endswith("\n"):
        try:
            json.loads(texts[-1])
        except ValueError:
            dropped = texts.pop()
            notes.append(
                f"{source}:{len(texts) + 1}: the last line is cut short ({len(dropped)} "
                "characters, the writer was stopped mid-line); read up to the line before"
            )
    if not texts or not texts[0].strip():
        raise SessionFormatError(f"{source}: empty; a recording starts with its header line")
    try:
        first = json.loads(texts[0])
    except ValueError:
        raise _not_a_recording(source, f"not JSON ({_start_of(texts[0])!r})") from None
    if not isinstance(first, dict):
        raise _not_a_recording(source, f"a JSON {type(first).__name__}")
    header = _header(first, source)
    parsed: list[SessionLine] = []
    for number, text in enumerate(texts[1:], start=2):
        if not text.strip():
            continue
        where = f"{source}:{number}"
        data = _object(text, where)
        kind, t_s = data.get("kind"), data.get("t_s")
        if not isinstance(kind, str) or isinstance(t_s, bool) or not isinstance(t_s, int | float):
            raise SessionFormatError(f"{where}: a line needs a string kind and a numeric t_s")
        parsed.append(SessionLine(kind, float(t_s), number, MappingProxyType(data), source))
    return Recording(source, header, tuple(parsed), tuple(notes))


def read_recording(path: Path) -> Recording:
    """Read a recording, all its parts as one session; SessionFormatError says what is wrong
    and where."""
    first = _read_file(path)
    if first.header.part != 1:
        name = first.header.first_part or "?"
        start = path.with_name(name)
        if not start.is_file():
            raise SessionFormatError(
                f"{path}: part {first.header.part} of the session that starts in {start}, which "
                "is gone; a part is read after the parts before it: restore them, or read an "
                "earlier session"
            )
        path, first = start, _read_file(start)
    lines, notes, parts = list(first.lines), list(first.notes), [str(path)]
    for number in itertools.count(2):
        following = part_path(path, number)
        if not following.is_file():
            break
        part = _read_file(following)
        if part.header.part != number or part.header.first_part != path.name:
            raise SessionFormatError(
                f"{following}: its header says part {part.header.part} of "
                f"{part.header.first_part!r}, not part {number} of {path.name!r}; rename or "
                "move the stray file"
            )
        lines += part.lines
        notes += part.notes
        parts.append(str(following))
    return Recording(str(path), first.header, tuple(lines), tuple(notes), tuple(parts))


def _read_file(path: Path) -> Recording:
    """Read one file of a recording."""
    try:
        with path.open(encoding="utf-8", newline="") as stream:
            return parse_lines(stream, str(path))
    except OSError as exc:
        raise SessionFormatError(
            f"{path}: cannot read the recording ({exc.strerror or exc})"
        ) from None
    except UnicodeDecodeError as exc:
        raise SessionFormatError(f"{path}: not UTF-8 text ({exc.reason}); no recording") from None
