"""Write a session's report into a folder: read the recording, build the report, draw, write.

Each file is written beside its final name and then moved over it, so a report cut short leaves
the previous files whole; `report.md` goes last, so it never names a PNG that is not there yet. In
an existing folder only the report's own files (`OWN_PATTERNS`) are replaced; nothing is deleted.
Every failure is a `ReportError` (or the reader's `SessionFormatError`) that names the path.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from slotop.actions.errors import ActionError
from slotop.actions.plots import png_bytes
from slotop.actions.report.build import OWN_PATTERNS, REPORT_MD, STEPS_CSV, build_report
from slotop.actions.session.reader import read_recording


class ReportError(ActionError):
    """A report that cannot be made: the recording or the folder is wrong; the message says how."""


@dataclass(frozen=True, slots=True)
class WrittenReport:
    """What a report wrote: the folder, its files, those it replaced, and what to know."""

    folder: Path
    files: tuple[str, ...]
    replaced: tuple[str, ...]
    left_alone: tuple[str, ...]
    notes: tuple[str, ...]


def _check_recording(path: Path) -> None:
    if not path.exists():
        raise ReportError(
            f"{path}: no such file; give the path of a session recording (slotop writes them "
            "to $XDG_STATE_HOME/slotop/sessions, ~/.local/state/slotop/sessions when unset, or "
            "where --record FILE said)"
        )
    if path.is_dir():
        raise ReportError(f"{path}: a folder, not a recording; give one .jsonl file in it")


def prepare_folder(folder: Path) -> None:
    """Make the report's folder (and its parents) unless it exists; refuse one it cannot write."""
    if folder.exists() and not folder.is_dir():
        raise ReportError(
            f"{folder}: exists and is not a folder; give --out a new folder, or one an earlier "
            "report wrote"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(
            f"{folder}: cannot create the report's folder ({exc.strerror or exc}); give --out "
            "a folder where you may write"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ReportError(
            f"{folder}: the folder is not writable; give --out a folder where you may write"
        )


def _partial(path: Path) -> Path:
    return path.with_name(f".{path.name}.partial")


def _put(path: Path, data: bytes) -> None:
    partial = _partial(path)
    try:
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise ReportError(
            f"{path}: cannot write ({exc.strerror or exc}); give --out a folder where you may "
            "write, with room left"
        ) from None


def _left_alone(folder: Path, written: tuple[str, ...]) -> tuple[str, ...]:
    """Files in the folder named like a report's own that this report did not write."""
    found = {p.name for pattern in OWN_PATTERNS for p in folder.glob(pattern) if p.is_file()}
    return tuple(sorted(found - set(written)))


def write_report(recording_path: Path, folder: Path) -> WrittenReport:
    """Read the recording, build its report and write it into `folder`; what it wrote."""
    _check_recording(recording_path)
    recording = read_recording(recording_path)
    report = build_report(recording, str(recording_path))
    prepare_folder(folder)
    names = report.file_names()
    replaced = tuple(name for name in names if (folder / name).exists())
    for name, figure in report.figures:
        _put(folder / name, png_bytes(figure))
    _put(folder / STEPS_CSV, report.steps_csv.encode("utf-8"))
    _put(folder / REPORT_MD, report.markdown.encode("utf-8"))
    return WrittenReport(folder, names, replaced, _left_alone(folder, names), report.notes)
