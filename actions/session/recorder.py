"""Writes a session recording: one append-only JSONL file, mode 0600, lines written as they come.

Callers hand lines to a queue and return; one writer thread encodes them in order and writes each
batch with `os.write` straight to the file, so what was handed over reaches the operating system
within milliseconds and a `kill -9` loses only what was still queued (well under a second). Nothing
here raises into the app: a file that cannot be created or written (a full disk, a read-only
folder) stops the recording, sets `failure`, and tells `on_failure` once; the session goes on.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from slotop.actions.session.lines import (
    action_line,
    event_line,
    gpu_line,
    header_line,
    probe_event_line,
    probe_records_line,
)
from slotop.actions.session.polls import ProbeState, probe_poll_line, replica_failed_line
from slotop.actions.session.readings import ReadingEncoder
from slotop.collectors.gpu.reader import GpuSnapshot
from slotop.collectors.monitor import MonitorPoll, MonitorShape
from slotop.collectors.probe.lag import ClientError
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.config import Settings

_log = logging.getLogger(__name__)
STATE_ENV = "XDG_STATE_HOME"
_Line = Callable[[], Mapping[str, Any]]
_CLOSE_WAIT_S = 2.0


def default_folder(settings: Settings, environ: Mapping[str, str] | None = None) -> Path:
    """Where recordings go: [session] folder, else $XDG_STATE_HOME/slotop/sessions, else ~/.local/state/…."""
    if settings.session.folder:
        return Path(settings.session.folder).expanduser()
    env = os.environ if environ is None else environ
    state = env.get(STATE_ENV) or str(Path.home() / ".local" / "state")
    return Path(state) / "slotop" / "sessions"


def file_name(started_at_s: float, url: str, command: str) -> str:
    """A recording's name: local start time, replica host and port, command (all safe for a path)."""
    parts = urlsplit(url)
    host = re.sub(r"[^A-Za-z0-9.-]", "-", parts.hostname or "replica")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = 0
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started_at_s))
    return f"{stamp}_{host}-{port}_{command}.jsonl"


def _create(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)


def _create_fresh(folder: Path, name: str) -> tuple[Path, int]:
    stem = name.removesuffix(".jsonl")
    for attempt in range(1, 100):
        path = folder / (name if attempt == 1 else f"{stem}-{attempt}.jsonl")
        try:
            return path, _create(path)
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder / name}: 99 recordings of that name already exist")


class SessionRecorder:
    """Records one session; every method returns at once and none raises."""

    def __init__(
        self,
        path: Path,
        fd: int | None,
        *,
        started_at_s: float,
        keep_gaps: bool = False,
        clock: Callable[[], float] = time.time,
        failure: str | None = None,
    ) -> None:
        self.path = path
        self.started_at_s = started_at_s
        self.keep_gaps = keep_gaps
        self.failure = failure
        self.on_failure: Callable[[str], None] | None = None
        self.lines_written = 0
        self.bytes_written = 0
        self.lines_handed = 0
        """Lines handed over so far (the header counts): line n of the file is the n-th handed."""
        self._handing = threading.Lock()
        self._status_named = False  # the first probe_poll with a status names its columns
        self._fd = fd
        self._clock = clock
        self._queue: queue.SimpleQueue[_Line | None] = queue.SimpleQueue()
        self._encoder = ReadingEncoder()
        self._closed = False
        self._thread: threading.Thread | None = None
        if fd is not None and failure is None:
            self._thread = threading.Thread(target=self._run, name="slotop-recorder", daemon=True)
            self._thread.start()

    @property
    def recording(self) -> bool:
        """Whether lines still go to the file."""
        return self.failure is None and not self._closed and self._fd is not None

    def where(self) -> str:
        """One line for the operator: where this session is recorded, or why it is not."""
        if self.failure is not None:
            return f"not recording: {self.failure}"
        return f"recording this session to {self.path}"

    # what callers hand over

    def _put(self, line: _Line) -> None:
        if self.recording:
            with self._handing:
                self.lines_handed += 1
                self._queue.put(line)

    def header(self, line: Mapping[str, Any]) -> None:
        """Write the header; the first line of the file."""
        self._put(lambda: line)

    def reading(self, poll: MonitorPoll) -> None:
        """Record one poll of the monitor (what changed since the last)."""
        self._put(lambda: self._encoder.encode(poll))

    def monitor(self, shape: MonitorShape, url: str) -> None:
        """Record the spans and percentiles the monitor builds snapshots with, before its readings."""
        data = {
            "kind": "monitor",
            "t_s": self._clock(),
            "url": url,
            "long_window_s": shape.long_window_s,
            "short_window_s": shape.short_window_s,
            "interval_s": shape.interval_s,
            "ttft_percentile": shape.ttft_percentile,
            "itl_percentile": shape.itl_percentile,
        }
        self._put(lambda: data)

    def probe_records(self, records: Sequence[ProbeRecord]) -> None:
        """Record requests that ended (nothing when there are none), a line per load step, so
        the gaps a line pools belong to one step."""
        if records:
            now = self._clock()
            by_step: dict[int, list[ProbeRecord]] = {}
            for record in records:
                by_step.setdefault(record.step, []).append(record)
            for kept in by_step.values():
                self._put(
                    lambda kept=tuple(kept): probe_records_line(  # type: ignore[misc]
                        now, kept, self.started_at_s, keep_gaps=self.keep_gaps
                    )
                )

    def probe_events(self, events: Sequence[ProbeEvent]) -> None:
        """Record changes of the probe's load."""
        for event in events:
            self._put(lambda event=event: probe_event_line(event))  # type: ignore[misc]

    def probe_poll(
        self,
        t_s: float,
        state: ProbeState,
        status: ProbeStatus | None = None,
        records: int = 0,
        events: Sequence[ProbeEvent] = (),
        clients: tuple[ClientError | None, ClientError | None] = (None, None),
    ) -> None:
        """Record one poll of the probe by the dashboard's feed (`polls.probe_poll_line`)."""
        kept = tuple(events)
        columns = status is not None and not self._status_named
        self._status_named = self._status_named or columns
        self._put(
            lambda: probe_poll_line(t_s, state, status, records, kept, clients, columns=columns)
        )

    def replica_failed(self, error: str, failures: int, at_s: float | None = None) -> None:
        """Record a poll of the replica that failed, with the reason the dashboard shows."""
        line = replica_failed_line(self._clock() if at_s is None else at_s, error, failures)
        self._put(lambda: line)

    def gpu(self, snapshot: GpuSnapshot) -> None:
        """Record a reading of the GPUs."""
        self._put(lambda: gpu_line(snapshot))

    def event(self, event: str, text: str, at_s: float | None = None, **data: Any) -> None:
        """Record a timeline entry."""
        line = event_line(self._clock() if at_s is None else at_s, event, text, **data)
        self._put(lambda: line)

    def action(self, action: str, data: Mapping[str, Any], at_s: float | None = None) -> None:
        """Record an action and its outcome (a restart, a sweep step, dials applied)."""
        line = action_line(self._clock() if at_s is None else at_s, action, data)
        self._put(lambda: line)

    def close(self, reason: str = "closed") -> None:
        """Write the `end` line and close the file; safe to call twice."""
        if self._closed:
            return
        if self.recording:
            end = {"kind": "end", "t_s": self._clock(), "reason": reason}
            self._queue.put(lambda: end)
        self._closed = True
        self._queue.put(None)
        if self._thread is not None:
            self._thread.join(_CLOSE_WAIT_S)
        if self._fd is not None and (self._thread is None or not self._thread.is_alive()):
            self._close_fd()

    # the writer thread

    def _close_fd(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _fail(self, why: str) -> None:
        self.failure = why
        self._close_fd()
        callback = self.on_failure
        if callback is not None:
            try:
                callback(why)
            except Exception:
                _log.exception("the recording-failure callback failed")

    def _run(self) -> None:
        while True:
            first = self._queue.get()  # close() puts None: nothing to wake up for until then
            batch = [first]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            stop = None in batch
            self._write([line for line in batch if line is not None])
            if stop or self.failure is not None:
                return

    def _write(self, lines: list[_Line]) -> None:
        if not lines or self._fd is None or self.failure is not None:
            return
        try:
            text = "".join(
                json.dumps(line(), allow_nan=False, separators=(",", ":")) + "\n" for line in lines
            )
        except Exception as exc:  # a line that cannot be encoded must not end the session
            self._fail(f"a line could not be written as JSON ({exc}); recording stopped")
            return
        data = text.encode("utf-8")
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            self._fail(f"{self.path}: cannot write ({exc.strerror or exc}); recording stopped")
            return
        self.lines_written += len(lines)
        self.bytes_written += len(data)


def start_recording(
    *,
    command: str,
    settings: Settings,
    path: Path | None = None,
    clock: Callable[[], float] = time.time,
    replica: Mapping[str, Any] | None = None,
) -> SessionRecorder:
    """Create the file (`path`, else a fresh name in the default folder) and write its header.

    Never raises: a file that cannot be made gives a recorder that says why in `failure`.
    """
    started_at_s = clock()
    keep_gaps = settings.session.itl_gaps
    try:
        if path is not None:
            fd = _create(path)
        else:
            folder = default_folder(settings)
            path, fd = _create_fresh(folder, file_name(started_at_s, settings.replica.url, command))
    except FileExistsError:
        shown = path if path is not None else default_folder(settings)
        return SessionRecorder(
            shown,
            None,
            started_at_s=started_at_s,
            failure=f"{shown} already exists; a recording is never appended to: give a new name",
        )
    except OSError as exc:
        shown = path if path is not None else default_folder(settings)
        return SessionRecorder(
            shown,
            None,
            started_at_s=started_at_s,
            failure=f"{shown}: cannot create the recording ({exc.strerror or exc}); "
            "give --record FILE in a writable folder, or --no-record",
        )
    recorder = SessionRecorder(
        path, fd, started_at_s=started_at_s, keep_gaps=keep_gaps, clock=clock
    )
    recorder.header(
        header_line(command=command, settings=settings, started_at_s=started_at_s, replica=replica)
    )
    return recorder


@dataclass(frozen=True, slots=True)
class RecordChoice:
    """Whether to record a session, and to which file (None: a fresh one in the default folder)."""

    enabled: bool = True
    path: Path | None = None


def record_choice(settings: Settings, path: Path | None, off: bool) -> RecordChoice:
    """What --record FILE / --no-record and [session] record say together (flags win)."""
    if off:
        return RecordChoice(False)
    if path is not None:
        return RecordChoice(True, path)
    return RecordChoice(settings.session.record)


def open_recording(
    choice: RecordChoice, *, command: str, settings: Settings
) -> SessionRecorder | None:
    """A recorder for the session as chosen, None when recording is off; never raises."""
    if not choice.enabled:
        return None
    return start_recording(command=command, settings=settings, path=choice.path)
