"""Recordings have a budget: a file past its size goes on in a next part that reads back as one
session, and the folder past its budget loses its oldest sessions, never one being written."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from slotop.actions.session.files import keep_budget, part_path, sessions_in
from slotop.actions.session.reader import SessionFormatError, read_recording
from slotop.actions.session.recorder import SessionRecorder, start_recording
from slotop.config import SessionSettings, Settings

KIB = 1024


def _settings(folder: Path, file_kib: float = 0, folder_kib: float = 0) -> Settings:
    return Settings(
        session=SessionSettings(
            folder=str(folder), max_file_mb=file_kib / 1024, max_folder_mb=folder_kib / 1024
        )
    )


def _record(recorder: SessionRecorder, events: int, text: str = "x" * 200) -> None:
    for index in range(events):
        recorder.event("note", f"{index} {text}", at_s=1000.0 + index)


def test_a_file_past_its_size_goes_on_in_parts_that_read_as_one(tmp_path: Path) -> None:
    whole = start_recording(command="attach", settings=_settings(tmp_path / "a"), clock=lambda: 5.0)
    parted = start_recording(
        command="attach", settings=_settings(tmp_path / "b", file_kib=4), clock=lambda: 5.0
    )
    for recorder in (whole, parted):
        _record(recorder, 60)
        recorder.close()
    assert len(whole.parts) == 1 and len(parted.parts) >= 3
    for path in parted.parts:  # each within its size, but for the one batch that overflowed it
        assert path.stat().st_size <= 4 * KIB + 2 * KIB
    assert parted.parts[1] == part_path(parted.path, 2) and parted.parts[1].name.endswith(
        ".part2.jsonl"
    )
    second = json.loads(parted.parts[1].read_text().splitlines()[0])
    assert second["part"] == 2 and second["first_part"] == parted.path.name

    one, many = read_recording(whole.path), read_recording(parted.path)
    assert [line.data for line in many.lines] == [line.data for line in one.lines]
    assert many.ended and many.parts == tuple(str(p) for p in parted.parts)
    assert many.header.command == "attach" and many.header.started_at_s == 5.0
    # Named by a later part, the session is read from its first.
    assert read_recording(parted.parts[-1]).lines == many.lines
    # A damaged line names the part and its line.
    broken = parted.parts[1]
    rows = broken.read_text().splitlines()
    broken.write_text("\n".join([*rows[:2], "{oops", *rows[3:]]) + "\n")
    with pytest.raises(SessionFormatError, match=rf"{broken}:3: not a JSON line"):
        read_recording(parted.path)


def test_a_later_part_without_its_first_is_refused_with_what_to_do(tmp_path: Path) -> None:
    recorder = start_recording(command="attach", settings=_settings(tmp_path, file_kib=2))
    _record(recorder, 30)
    recorder.close()
    recorder.path.unlink()
    with pytest.raises(SessionFormatError, match=r"part 2 of the session that starts in .* gone"):
        read_recording(recorder.parts[1])


def _old_session(folder: Path, stem: str, kib: int, age_s: float, parts: int = 1) -> list[Path]:
    """A finished recording of `kib` KiB per part, last written `age_s` ago."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for number in range(1, parts + 1):
        path = part_path(folder / f"{stem}.jsonl", number)
        header = {"schema": "slotop.session/1", "started_at_s": 1.0, "command": "attach"}
        path.write_text(json.dumps(header, separators=(",", ":")) + "\n" + "x" * kib * KIB)
        when = time.time() - age_s
        os.utime(path, (when, when))
        made.append(path)
    return made


def test_the_oldest_sessions_go_whole_until_the_folder_fits(tmp_path: Path) -> None:
    oldest = _old_session(tmp_path, "a", 10, 300, parts=3)
    older = _old_session(tmp_path, "b", 10, 200)
    newer = _old_session(tmp_path, "c", 10, 100)
    stranger = tmp_path / "notes.jsonl"  # not a recording: never counted away
    stranger.write_text('{"mine": true}\n' + "y" * 10 * KIB)
    os.utime(stranger, (1.0, 1.0))
    (tmp_path / "keep.txt").write_text("not a .jsonl")
    pruned = keep_budget(tmp_path, 35 * KIB)
    assert [s.stem for s in pruned.deleted] == ["a"]
    assert not any(p.exists() for p in oldest) and all(p.exists() for p in (*older, *newer))
    pruned = keep_budget(tmp_path, 15 * KIB, keep=("b",))
    assert [s.stem for s in pruned.deleted] == ["c"]  # b is kept: c is the next oldest
    assert stranger.exists() and older[0].exists() and not newer[0].exists()
    assert pruned.left_bytes > 15 * KIB  # the stranger and b: nothing else may go


def test_a_session_being_written_is_never_deleted(tmp_path: Path) -> None:
    _old_session(tmp_path, "old", 10, 500)
    live = start_recording(command="attach", settings=_settings(tmp_path))  # no budget: kept
    _record(live, 40)
    time.sleep(0.2)
    os.utime(live.path, (1.0, 1.0))  # older than the finished one, still being written
    pruned = keep_budget(tmp_path, 1)
    assert [s.stem for s in pruned.deleted] == ["old"] and live.path.exists()
    live.close()
    assert [s.stem for s in keep_budget(tmp_path, 1).deleted] == [live.path.stem]


def test_a_new_session_keeps_the_budget_and_says_what_it_deleted(tmp_path: Path) -> None:
    _old_session(tmp_path, "20200101-000000_h-1_attach", 40, 400)
    _old_session(tmp_path, "20200102-000000_h-1_attach", 40, 300, parts=2)
    _old_session(tmp_path, "20200103-000000_h-1_attach", 40, 200)
    told: list[str] = []
    recorder = start_recording(
        command="attach", settings=_settings(tmp_path, file_kib=8, folder_kib=100)
    )
    recorder.on_note = told.append
    _record(recorder, 100)
    recorder.close()
    left = {s.stem for s in sessions_in(tmp_path)}
    assert left == {"20200103-000000_h-1_attach", recorder.path.stem}
    assert sum(s.size_bytes for s in sessions_in(tmp_path)) <= 100 * KIB + 8 * KIB
    assert any("deleted 2 old recording(s)" in t and "max_folder_mb" in t for t in told), told
    assert any("part 2" in t for t in told)
    assert read_recording(recorder.path).ended


def test_a_record_file_elsewhere_never_prunes_its_folder(tmp_path: Path) -> None:
    mine = _old_session(tmp_path / "mine", "precious", 40, 400)
    settings = _settings(tmp_path / "sessions", file_kib=4, folder_kib=8)
    recorder = start_recording(
        command="attach", settings=settings, path=tmp_path / "mine" / "s.jsonl"
    )
    _record(recorder, 60)
    recorder.close()
    assert all(p.exists() for p in mine) and len(recorder.parts) > 1


def test_a_part_that_cannot_be_made_stops_the_recording_and_says_so(tmp_path: Path) -> None:
    recorder = start_recording(command="attach", settings=_settings(tmp_path, file_kib=8))
    part_path(recorder.path, 2).mkdir()  # the next part's name is taken: it cannot be created
    told: list[str] = []
    recorder.on_failure = told.append
    _record(recorder, 30)
    recorder.close()
    assert recorder.failure is not None and "cannot create the next part" in recorder.failure
    assert told == [recorder.failure]
    recording = read_recording(recorder.path)  # what was written reads to its last line
    assert recording.lines and not recording.ended
