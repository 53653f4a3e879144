"""Writes a session recording: append-only JSONL, mode 0600, lines written as they come.

Callers hand lines to a queue and return; one writer thread encodes them in order and writes each
batch with `os.write` straight to the file, so what was handed over reaches the operating system
within milliseconds and a `kill -9` loses only what was still queued (well under a second). Nothing
here raises into the app: a file that cannot be created or written (a full disk, a read-only
folder) stops the recording, sets `failure`, and tells `on_failure` once; the session goes on.

A file that would pass `[session] max_file_mb` is closed and the session goes on in its next
part (`files.part_path`), whose first line names the first; the folder's budget is kept at the
start and at each part (`files.keep_budget`), and `on_note` hears of both. Every batch is
scrubbed of the session's known secrets before it is written.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotop.actions.session import files
from slotop.actions.session.files import MIB, file_name
from slotop.actions.session.lines import (
    SCHEMA,
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
from slotop.collectors.probe.lag import NO_CLIENT_ERRORS, WindowClientErrors
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.config import Settings, secret_values
from slotop.redact import NO_SECRETS, Scrubber

__all__ = [
    "RecordChoice",
    "SessionRecorder",
    "default_folder",
    "file_name",
    "open_recording",
    "record_choice",
    "start_recording",
]
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
        max_file_bytes: int = 0,
        budget: tuple[Path, int] | None = None,
        scrub: Scrubber = NO_SECRETS,
    ) -> None:
        self.path = path
        self.started_at_s = started_at_s
        self.keep_gaps = keep_gaps
        self.failure = failure
        self.on_failure: Callable[[str], None] | None = None
        self._on_note: Callable[[str], None] | None = None
        self._notes_held: list[str] = []
        self._noting = threading.Lock()
        self.lines_written = 0
        self.parts: list[Path] = [path]
        self.max_file_bytes = max_file_bytes
        self._budget = budget
        self._scrub = scrub
        self._part_bytes = 0
        self._header: Mapping[str, Any] = {}
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
            files.hold(fd)
            self._thread = threading.Thread(target=self._run, name="slotop-recorder", daemon=True)
            self._thread.start()

    @property
    def on_note(self) -> Callable[[str], None] | None:
        """Told, from the writer's thread, when the session goes on in a new part or old
        sessions were deleted to keep the folder's budget; what came before it was set is told
        when it is."""
        return self._on_note

    @on_note.setter
    def on_note(self, callback: Callable[[str], None] | None) -> None:
        with self._noting:
            self._on_note = callback
            held, self._notes_held = self._notes_held, []
        for text in held:
            self._tell(callback, text)

    def _note(self, text: str) -> None:
        with self._noting:
            callback = self._on_note
            if callback is None:
                self._notes_held.append(text)
                return
        self._tell(callback, text)

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
        self._header = line
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
        clients: WindowClientErrors = NO_CLIENT_ERRORS,
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
        self._tell(self.on_failure, why)

    def _tell(self, callback: Callable[[str], None] | None, text: str) -> None:
        if callback is not None:
            try:
                callback(text)
            except Exception:
                _log.exception("a recording callback failed")

    def _keep_budget(self) -> None:
        """Delete the folder's oldest sessions past its budget (never this one); say so."""
        if self._budget is None:
            return
        folder, budget_bytes = self._budget
        stem = self.path.name.removesuffix(".jsonl")
        try:
            pruned = files.keep_budget(folder, budget_bytes, keep=(stem,))
        except OSError as exc:  # the budget is a courtesy: it never stops the recording
            _log.warning("cannot keep the budget of %s: %s", folder, exc)
            return
        if pruned.deleted:
            self._note(
                f"deleted {len(pruned.deleted)} old recording(s), {pruned.freed_bytes / MIB:.1f} "
                f"MiB, to keep {folder} within its budget ([session] max_folder_mb = "
                f"{budget_bytes / MIB:g}); {pruned.left_bytes / MIB:.1f} MiB left",
            )

    def _next_part(self) -> bool:
        """Close this part and open the next, its first line naming the session's first file;
        False (the recording stopped) when it cannot be made."""
        number = len(self.parts) + 1
        path = files.part_path(self.path, number)
        try:
            fd = files.create(path)
        except OSError as exc:
            self._fail(
                f"{path}: cannot create the next part of the recording ({exc.strerror or exc}); "
                "recording stopped (free space, or move [session] folder)"
            )
            return False
        files.hold(fd)
        self._close_fd()
        self._fd = fd
        self.parts.append(path)
        self._part_bytes = 0
        head = {
            "schema": self._header.get("schema", SCHEMA),
            "part": number,
            "first_part": self.path.name,
            "slotop_version": self._header.get("slotop_version"),
            "started_at_s": self.started_at_s,
            "command": self._header.get("command", ""),
            "t_s": self._clock(),
        }
        if not self._write_bytes((json.dumps(head, separators=(",", ":")) + "\n").encode()):
            return False
        self._note(f"the recording goes on in {path.name} (part {number})")
        self._keep_budget()
        return True

    def _run(self) -> None:
        self._keep_budget()
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
        """Write a batch, each line scrubbed; a line that would pass the file's size goes into
        the next part, with the lines after it."""
        if not lines or self._fd is None or self.failure is not None:
            return
        try:
            texts = [json.dumps(line(), allow_nan=False, separators=(",", ":")) for line in lines]
        except Exception as exc:  # a line that cannot be encoded must not end the session
            self._fail(f"a line could not be written as JSON ({exc}); recording stopped")
            return
        pending: list[bytes] = []
        size = 0
        for text in texts:
            data = (self._scrub(text) + "\n").encode("utf-8")
            filled = self._part_bytes + size
            if self.max_file_bytes and filled and filled + len(data) > self.max_file_bytes:
                if not self._write_bytes(b"".join(pending)) or not self._next_part():
                    return
                pending, size = [], 0
            pending.append(data)
            size += len(data)
        if self._write_bytes(b"".join(pending)):
            self.lines_written += len(lines)

    def _write_bytes(self, data: bytes) -> bool:
        """Write to the current part; False (the recording stopped, and why) when it fails."""
        if not data:
            return True
        assert self._fd is not None
        try:
            view = memoryview(data)
            while view:
                written = os.write(self._fd, view)
                view = view[written:]
        except OSError as exc:
            self._fail(
                f"{self.parts[-1]}: cannot write ({exc.strerror or exc}); recording stopped, "
                "the session goes on (free space, or move [session] folder)"
            )
            return False
        self._part_bytes += len(data)
        return True


def start_recording(
    *,
    command: str,
    settings: Settings,
    path: Path | None = None,
    clock: Callable[[], float] = time.time,
    replica: Mapping[str, Any] | None = None,
    secrets: Sequence[str] = (),
) -> SessionRecorder:
    """Create the file (`path`, else a fresh name in the default folder) and write its header.

    The folder's budget applies to recordings in the sessions folder only, never to a folder a
    `--record FILE` names. `secrets`: more values to keep out of it than the settings hold.
    Never raises: a file that cannot be made gives a recorder that says why in `failure`.
    """
    started_at_s = clock()
    keep_gaps = settings.session.itl_gaps
    folder = default_folder(settings)
    try:
        if path is not None:
            fd = files.create(path)
        else:
            path, fd = files.create_fresh(
                folder, file_name(started_at_s, settings.replica.url, command)
            )
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
    session = settings.session
    budget = int(session.max_folder_mb * MIB)
    in_folder = path.parent.resolve() == folder.resolve()
    recorder = SessionRecorder(
        path,
        fd,
        started_at_s=started_at_s,
        keep_gaps=keep_gaps,
        clock=clock,
        max_file_bytes=int(session.max_file_mb * MIB),
        budget=(folder, budget) if budget and in_folder else None,
        scrub=Scrubber([*secret_values(settings), *secrets]),
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
