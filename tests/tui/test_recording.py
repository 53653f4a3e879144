"""The dashboard says where it records, and its timeline and dials go into the recording."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import SessionRecorder, start_recording
from slotop.config import SessionSettings, Settings
from slotop.tui.app import SlotopApp
from slotop.tui.messages import DialsApplied

pytestmark = pytest.mark.anyio


async def test_the_timeline_says_where_and_is_recorded(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    recorder = start_recording(command="attach", settings=Settings(), path=path)
    app = SlotopApp(Settings(), clock=lambda: 50.0, recorder=recorder)
    async with app.run_test() as pilot:
        await pilot.pause()
        app.note("probe", "load on: 4 in flight")
        app.post_message(DialsApplied(Dials("fp8", 32, None)))
        await pilot.pause()
        texts = [(e.kind, e.text) for e in app.inputs.events]
        assert ("session", f"recording this session to {path}") in texts
    recorder.close()
    lines = read_recording(path).lines
    events = [(line.data["event"], line.data["text"]) for line in lines if line.kind == "event"]
    assert events == [
        ("session", f"recording this session to {path}"),
        ("probe", "load on: 4 in flight"),
    ]
    dials = [line.data["dials"] for line in lines if line.kind == "action"]
    assert dials == [Dials("fp8", 32, None).to_json()]


async def test_a_recording_that_fails_is_a_note_and_the_app_goes_on() -> None:
    recorder = SessionRecorder(Path("/dev/full"), os.open("/dev/full", os.O_WRONLY), started_at_s=0)
    app = SlotopApp(Settings(), clock=lambda: 50.0, recorder=recorder)
    async with app.run_test() as pilot:
        app.note("probe", "load on")
        for _ in range(20):
            await pilot.pause(0.05)
            if recorder.failure is not None and any(
                "No space left" in e.text for e in app.inputs.events
            ):
                break
        notes = [e.text for e in app.inputs.events if e.kind == "session"]
        assert any("cannot write (No space left on device); recording stopped" in t for t in notes)
        assert app.is_running
    recorder.close()


async def test_a_folder_that_cannot_be_written_is_a_note_and_the_app_goes_on(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # so no folder can be made below it, even by root
    settings = Settings(session=SessionSettings(folder=str(blocker / "sessions")))
    recorder = start_recording(command="attach", settings=settings)
    app = SlotopApp(settings, clock=lambda: 50.0, recorder=recorder)
    async with app.run_test() as pilot:
        await pilot.pause()
        notes = [e.text for e in app.inputs.events if e.kind == "session"]
        assert any(
            t.startswith(f"not recording: {blocker / 'sessions'}: cannot create the recording")
            for t in notes
        ), notes
        app.note("probe", "load on")
        await pilot.pause()
        assert app.is_running and any(e.text == "load on" for e in app.inputs.events)
    recorder.close()
