"""Where recordings live: file names, a session's parts, and the folder's budget.

A session is one file, or a first file and its next parts beside it (`NAME.jsonl`,
`NAME.part2.jsonl`, …) once a file reached `[session] max_file_mb`. The folder's budget
(`[session] max_folder_mb`) is kept by deleting whole sessions, oldest first; a session still
being written holds a lock on its newest part, and is never deleted, nor is any file that does
not start with a recording's header.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from slotop.actions.session.lines import SCHEMA_NAME

_PART = re.compile(r"^(?P<stem>.+?)(?:\.part(?P<number>\d+))?\.jsonl$")
_HEADER_START = f'{{"schema":"{SCHEMA_NAME}/'.encode()
MIB = 1024 * 1024


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


def part_path(first: Path, number: int) -> Path:
    """Where part `number` of the session whose first file is `first` goes (1 is `first`)."""
    if number == 1:
        return first
    stem = first.name.removesuffix(".jsonl")
    return first.with_name(f"{stem}.part{number}.jsonl")


def part_of(path: Path) -> tuple[str, int] | None:
    """The session a recording file belongs to (its first file's stem) and its part number."""
    found = _PART.match(path.name)
    if found is None:
        return None
    return found["stem"], int(found["number"] or 1)


def create(path: Path) -> int:
    """Create a recording file, mode 0600 (its folder 0700 when made), and return its descriptor
    for appending; FileExistsError when it exists (a recording is never appended to)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)


def create_fresh(folder: Path, name: str) -> tuple[Path, int]:
    """Create `name` in `folder`, or `NAME-2.jsonl`, … when it is taken."""
    stem = name.removesuffix(".jsonl")
    for attempt in range(1, 100):
        path = folder / (name if attempt == 1 else f"{stem}-{attempt}.jsonl")
        if attempt > 1 and part_path(path, 2).exists():
            continue
        try:
            return path, create(path)
        except FileExistsError:
            continue
    raise FileExistsError(f"{folder / name}: 99 recordings of that name already exist")


def hold(fd: int) -> None:
    """Mark a file as being written: the folder's budget never deletes a session so held."""
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _held_elsewhere(path: Path) -> bool:
    """Whether another recorder holds the file (see `hold`)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True  # cannot tell: leave it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops the lock taken just now
    return False


def _is_recording(path: Path) -> bool:
    try:
        with path.open("rb") as stream:
            return stream.read(len(_HEADER_START)) == _HEADER_START
    except OSError:
        return False


@dataclass(frozen=True, slots=True)
class Session:
    """One recorded session in a folder: its files (first part first), bytes, last write."""

    stem: str
    files: tuple[Path, ...]
    size_bytes: int
    last_write_s: float


def sessions_in(folder: Path) -> list[Session]:
    """The sessions a folder holds, the least recently written first."""
    found: dict[str, list[tuple[int, Path, os.stat_result]]] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return []
    for entry in entries:
        path = Path(entry.path)
        named = part_of(path)
        if named is None or not entry.is_file(follow_symlinks=False):
            continue
        try:
            stat = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        found.setdefault(named[0], []).append((named[1], path, stat))
    sessions = []
    for stem, parts in found.items():
        parts.sort(key=lambda part: part[0])
        sessions.append(
            Session(
                stem,
                tuple(path for _, path, _ in parts),
                sum(stat.st_size for _, _, stat in parts),
                max(stat.st_mtime for _, _, stat in parts),
            )
        )
    sessions.sort(key=lambda session: session.last_write_s)
    return sessions


@dataclass(frozen=True, slots=True)
class Pruned:
    """What keeping a folder's budget did: the sessions deleted and their bytes, what is left."""

    deleted: tuple[Session, ...]
    freed_bytes: int
    left_bytes: int


def keep_budget(folder: Path, budget_bytes: int, keep: Iterable[str] = ()) -> Pruned:
    """Delete the least recently written sessions until the folder's recordings fit the budget.

    Never the sessions whose stems are in `keep` (the one being written), nor one another process
    is writing, nor files that are not recordings. A file that cannot be deleted is left.
    """
    sessions = sessions_in(folder)
    total = sum(session.size_bytes for session in sessions)
    kept = set(keep)
    deleted: list[Session] = []
    freed = 0
    for session in sessions:
        if total <= budget_bytes:
            break
        if session.stem in kept or _held_elsewhere(session.files[-1]):
            continue
        if not _is_recording(session.files[0]):
            continue
        gone = 0
        for path in session.files:
            with contextlib.suppress(OSError):
                size = path.stat().st_size
                path.unlink()
                gone += size
        if gone:
            deleted.append(session)
            freed += gone
            total -= gone
    return Pruned(tuple(deleted), freed, total)
