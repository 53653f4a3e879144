"""`slotop report` on bad input: each failure names the path and what to do, with exit code 2; a
cut last line is read past with a note; an existing folder keeps every file but the report's own."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from slotop.actions.session.recorder import start_recording
from slotop.cli import main
from slotop.config import Settings
from tests.support.png import png_size

OWN = ("report.md", "steps.csv", "timeline.png")


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    """A short recording the real recorder wrote: a header, a probe event, an action, its end."""
    path = tmp_path / "session.jsonl"
    recorder = start_recording(
        command="attach", settings=Settings(), path=path, clock=iter(range(100, 200)).__next__
    )
    recorder.event("note", "a note the operator left")
    recorder.action("dials", {"dials": {"kv_cache_dtype": "fp8", "max_num_seqs": 32}})
    recorder.close()
    assert recorder.failure is None
    return path


def _report(path: Path, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["report", str(path), "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_recording_without_readings_still_reports(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _report(recording, tmp_path / "out", capsys)
    assert code == 0
    assert f"open {tmp_path / 'out' / 'report.md'}" in out
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "| readings | none recorded: the replica was never polled |" in text
    assert "| +1.0 s | note | a note the operator left |" in text
    assert "#1 kv fp8 · seqs 32" in text  # the dials the session learnt name its configuration
    assert png_size(tmp_path / "out" / "timeline.png") == (1400, 900)
    assert (
        (tmp_path / "out" / "steps.csv")
        .read_text(encoding="utf-8")
        .startswith("configuration,configuration_label,")
    )


def test_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere.jsonl"
    code, _, err = _report(missing, tmp_path / "out", capsys)
    assert code == 2
    assert f"{missing}: no such file; give the path of a session recording" in err
    assert not (tmp_path / "out").exists()


def test_a_folder_given_as_the_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _report(tmp_path, tmp_path / "out", capsys)
    assert code == 2
    assert f"{tmp_path}: a folder, not a recording" in err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            "hello\n",
            "not a slotop session recording (no slotop.session header: its first line is not "
            "JSON ('hello')). A recording is JSON lines whose first line is its header",
        ),
        (
            '{"schema": "something/1"}\n',
            "not a slotop session recording (no slotop.session header: its first line is "
            "schema 'something/1')",
        ),
        ("[1]\n", "its first line is a JSON list). A recording is JSON lines"),
        ("", "empty; a recording starts with its header line"),
    ],
)
def test_a_file_that_is_no_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, words: str
) -> None:
    path = tmp_path / "other.jsonl"
    path.write_text(text, encoding="utf-8")
    code, _, err = _report(path, tmp_path / "out", capsys)
    assert code == 2
    assert str(path) in err and words in err
    if text:
        assert "~/.local/state/slotop/sessions/" in err and "--record FILE" in err
    assert not (tmp_path / "out").exists()


def test_a_recording_from_a_newer_slotop_is_refused_with_the_version_it_needs(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = recording.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    header["schema"] = "slotop.session/99"
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")
    code, _, err = _report(newer, tmp_path / "out", capsys)
    assert code == 2
    assert "it needs a slotop that reads slotop.session/99: upgrade slotop" in err


def test_a_cut_last_line_is_read_past_with_a_note_in_the_report(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with recording.open("a", encoding="utf-8") as stream:
        stream.write('{"kind":"event","t_s":150.0,"event":"no')
    code, _, err = _report(recording, tmp_path / "out", capsys)
    assert code == 0
    assert "note: " in err and "the last line is cut short" in err
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Notes from reading it:" in text and "the last line is cut short" in text


def test_an_existing_folder_keeps_every_file_but_the_reports_own(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    (out / "curve-9.png").write_bytes(b"an earlier report's")
    (out / "report.md").write_text("an earlier report", encoding="utf-8")
    code, _, err = _report(recording, out, capsys)
    assert code == 0
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert (out / "curve-9.png").read_bytes() == b"an earlier report's"
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# slotop session report")
    assert f"replaced in {out}: report.md" in err
    assert "not part of this one): curve-9.png" in err
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ("notes.txt", "curve-9.png", *OWN)
    )  # no partial file is left behind


def test_a_file_where_the_folder_should_be(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = tmp_path / "taken"
    taken.write_text("a file", encoding="utf-8")
    code, _, err = _report(recording, taken, capsys)
    assert code == 2
    assert f"{taken}: exists and is not a folder; give --out a new folder" in err
    code, _, err = _report(recording, taken / "below", capsys)
    assert code == 2
    assert f"{taken / 'below'}: cannot create the report's folder" in err
    assert taken.read_text(encoding="utf-8") == "a file"


def test_a_folder_that_cannot_be_written(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("this user writes into a read-only folder (root): nothing to refuse")
        code, _, err = _report(recording, locked, capsys)
    finally:
        locked.chmod(0o700)
    assert code == 2
    assert f"{locked}: the folder is not writable; give --out a folder where you may write" in err


def test_without_out_the_report_goes_beside_the_current_folder(
    recording: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    assert main(["report", str(recording)]) == 0
    assert (work / "session-report" / "report.md").is_file()
    assert "session-report" in capsys.readouterr().out


def test_help_says_what_goes_in_the_folder_and_how_to_open_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = capsys.readouterr().out
    for words in ("report.md", "steps.csv", "timeline.png", "curve-N.png", "Markdown viewer"):
        assert words in text
    assert "only these files are replaced" in text


def test_a_broken_settings_file_is_a_note_and_the_recordings_slo_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from slotop.config import with_overrides

    path = tmp_path / "slo.jsonl"
    settings = with_overrides(Settings(), {"slo.ttft_ms": 321.0, "slo.itl_ms": 43.0})
    recorder = start_recording(
        command="attach", settings=settings, path=path, clock=iter(range(100, 200)).__next__
    )
    recorder.close()
    here = tmp_path / "here"
    here.mkdir()
    (here / "slotop.toml").write_text("[slo]\nttft_ms = 'fast'\n[oops\n", encoding="utf-8")
    monkeypatch.chdir(here)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    code, _, err = _report(path, tmp_path / "out", capsys)
    assert code == 0
    assert "slotop report: note: settings not read, the report takes the SLO" in err
    assert "slotop.toml" in err
    text = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "321 ms" in text and "43 ms" in text
