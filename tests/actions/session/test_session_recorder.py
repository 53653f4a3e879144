"""The recorder: where the file goes, its mode, what it writes, and that it never raises."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import (
    RecordChoice,
    SessionRecorder,
    default_folder,
    file_name,
    open_recording,
    record_choice,
    start_recording,
)
from slotop.config import SessionSettings, Settings


def test_the_file_is_private_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "s.jsonl"
    recorder = start_recording(command="sweep", settings=Settings(), path=path, clock=lambda: 7.0)
    recorder.event("probe", "load on")
    recorder.action("dials", {"dials": {"kv_cache_dtype": "fp8"}})
    recorder.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    recording = read_recording(path)
    assert recording.header.command == "sweep" and recording.header.started_at_s == 7.0
    assert [(line.kind, dict(line.data)) for line in recording.lines] == [
        ("event", {"kind": "event", "t_s": 7.0, "event": "probe", "text": "load on"}),
        ("action", {"kind": "action", "t_s": 7.0, "action": "dials",
                    "dials": {"kv_cache_dtype": "fp8"}}),
        ("end", {"kind": "end", "t_s": 7.0, "reason": "closed"}),
    ]  # fmt: skip
    assert recorder.lines_written == 4 and recorder.where() == f"recording this session to {path}"


def test_the_default_folder_follows_xdg_and_the_settings(tmp_path: Path) -> None:
    plain = Settings()
    assert default_folder(plain, {"XDG_STATE_HOME": "/st"}) == Path("/st/slotop/sessions")
    assert default_folder(plain, {}) == Path.home() / ".local/state/slotop/sessions"
    moved = Settings(session=SessionSettings(folder=str(tmp_path)))
    assert default_folder(moved, {"XDG_STATE_HOME": "/st"}) == tmp_path


def test_a_name_says_when_where_and_what() -> None:
    stamp = "%Y%m%d-%H%M%S"
    import time

    when = time.strftime(stamp, time.localtime(0.0))
    assert (
        file_name(0.0, "http://127.0.0.1:8000", "attach") == f"{when}_127.0.0.1-8000_attach.jsonl"
    )
    assert file_name(0.0, "https://[::1]/v1", "sweep") == f"{when}_--1-443_sweep.jsonl"


def test_fresh_names_never_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    first = start_recording(command="demo", settings=Settings(), clock=lambda: 0.0)
    second = start_recording(command="demo", settings=Settings(), clock=lambda: 0.0)
    first.close()
    second.close()
    assert first.path.parent == tmp_path / "slotop" / "sessions"
    assert second.path.name == first.path.name.replace(".jsonl", "-2.jsonl")
    assert stat.S_IMODE(first.path.parent.stat().st_mode) == 0o700


@pytest.mark.parametrize(
    ("flag", "off", "setting", "choice"),
    [
        (None, False, True, RecordChoice(True, None)),
        (None, False, False, RecordChoice(False)),
        (Path("f.jsonl"), False, False, RecordChoice(True, Path("f.jsonl"))),
        (None, True, True, RecordChoice(False)),
    ],
)
def test_flags_win_over_the_setting(
    flag: Path | None, off: bool, setting: bool, choice: RecordChoice
) -> None:
    settings = Settings(session=SessionSettings(record=setting))
    assert record_choice(settings, flag, off) == choice
    if not choice.enabled:
        assert open_recording(choice, command="attach", settings=settings) is None


def test_an_existing_file_is_refused_not_appended_to(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("keep me\n")
    recorder = start_recording(command="attach", settings=Settings(), path=path)
    recorder.event("probe", "load on")
    recorder.close()
    assert not recorder.recording
    assert recorder.where() == (
        f"not recording: {path} already exists; a recording is never appended to: give a new name"
    )
    assert path.read_text() == "keep me\n"


def test_an_unwritable_folder_is_a_note_not_a_crash(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o500)
    if os.access(folder, os.W_OK):
        pytest.skip("running as a user who can write anywhere (root)")
    recorder = start_recording(command="attach", settings=Settings(), path=folder / "s.jsonl")
    recorder.event("probe", "never written")
    recorder.close()
    assert recorder.failure is not None and "cannot create the recording" in recorder.failure


def test_a_full_disk_stops_the_recording_and_says_so() -> None:
    told: list[str] = []
    fd = os.open("/dev/full", os.O_WRONLY)
    recorder = SessionRecorder(Path("/dev/full"), fd, started_at_s=0.0)
    recorder.on_failure = told.append
    recorder.event("probe", "load on")
    recorder.close()
    assert recorder.failure is not None
    assert recorder.failure.startswith("/dev/full: cannot write (No space left on device)")
    assert told == [recorder.failure]
    recorder.event("probe", "after the failure: dropped, no error")
