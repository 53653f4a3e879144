"""`slotop replay`: its help teaches the keys, and a file it cannot play is refused with why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotop.actions.session.lines import header_line
from slotop.cli import main
from slotop.config import Settings

START = 1_800_000_000.0


def _header(schema: str = "slotop.session/1") -> str:
    header = header_line(command="attach", settings=Settings(), started_at_s=START)
    header["schema"] = schema
    return json.dumps(header) + "\n"


def _recording(tmp_path: Path) -> Path:
    path = tmp_path / "short.jsonl"
    end = {"kind": "end", "t_s": START + 90.0, "reason": "closed"}
    path.write_text(_header() + json.dumps(end) + "\n", encoding="utf-8")
    return path


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_the_help_teaches_the_keys_and_the_times(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["replay", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for words in (
        "space, p",
        "step one poll",
        "next / previous timeline entry",
        "1×, 2×, 5×",
        "REPLAY",
        "--at TIME",
        "+1:30",
        "--speed",
        "examples:",
    ):
        assert words in out, words


def test_a_missing_file_is_refused_with_its_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(["replay", str(tmp_path / "gone.jsonl")], capsys)
    assert code == 2
    assert err == (
        f"slotop replay: {tmp_path / 'gone.jsonl'}: cannot read the recording "
        "(No such file or directory)\n"
    )


def test_a_file_that_is_no_recording_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": "world"}\n', encoding="utf-8")
    code, err = _run(["replay", str(path)], capsys)
    assert code == 2
    assert f"{path}: not a slotop session recording (no slotop.session header" in err
    assert "a JSON object without a schema" in err and "[session] folder" in err


def test_a_newer_recording_is_refused_with_the_version_it_needs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "future.jsonl"
    path.write_text(_header("slotop.session/7"), encoding="utf-8")
    code, err = _run(["replay", str(path)], capsys)
    assert code == 2
    assert "recorded with schema slotop.session/7, newer than this slotop reads" in err
    assert "it needs a slotop that reads slotop.session/7" in err


@pytest.mark.parametrize(
    ("at", "words"),
    [
        ("+5:00", "is outside"),
        ("-2:00", "is outside"),
        ("whenever", "is no time in the recording; give start, end"),
    ],
)
def test_a_start_outside_the_recording_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], at: str, words: str
) -> None:
    path = _recording(tmp_path)
    code, err = _run(["replay", str(path), f"--at={at}"], capsys)  # = : -2:00 is no flag
    assert code == 2
    assert words in err
    if words == "is outside":
        assert "which runs 1:30 from its start" in err


@pytest.mark.parametrize("speed", ["0", "-2", "fast", "5000"])
def test_a_speed_that_is_no_speed_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], speed: str
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["replay", str(_recording(tmp_path)), "--speed", speed])
    assert done.value.code == 2
    assert "--speed" in capsys.readouterr().err
