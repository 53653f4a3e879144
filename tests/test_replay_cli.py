"""`slotop replay`: its help teaches the keys, a file it cannot play is refused with why, and a
broken settings file it finds on its own is a note, not a refusal (one named with --config is)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from slotop.actions.session.lines import header_line
from slotop.cli import main
from slotop.config import Settings, with_overrides
from tests.support.tmux import Terminal

START = 1_800_000_000.0


def _header(schema: str = "slotop.session/1", settings: Settings | None = None) -> str:
    header = header_line(command="attach", settings=settings or Settings(), started_at_s=START)
    header["schema"] = schema
    return json.dumps(header) + "\n"


def _recording(tmp_path: Path, settings: Settings | None = None) -> Path:
    path = tmp_path / "short.jsonl"
    end = {"kind": "end", "t_s": START + 90.0, "reason": "closed"}
    path.write_text(_header(settings=settings) + json.dumps(end) + "\n", encoding="utf-8")
    return path


def _broken_settings(folder: Path) -> Path:
    """A settings file with a percentile no SLO can have, in ``folder``."""
    folder.mkdir(exist_ok=True)
    path = folder / "slotop.toml"
    path.write_text("[slo]\nttft_percentile = 120\n", encoding="utf-8")
    return path


def _note(settings_file: Path) -> str:
    return (
        "slotop replay: note: settings not read, the replay plays with the recording's own "
        f"settings (fix the file for the commands that read it): {settings_file}: "
        "[slo] ttft_percentile = 120; expected between 0 and 100, exclusive"
    )


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


@pytest.fixture
def broken_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder whose ./slotop.toml is broken, and no other settings file to find."""
    settings_file = _broken_settings(tmp_path / "here")
    monkeypatch.chdir(settings_file.parent)
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    return settings_file


def test_a_broken_settings_file_found_here_is_one_note_and_the_replay_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], broken_here: Path
) -> None:
    path = _recording(tmp_path)
    # --at past the end: the replay's own check of the recording answers, so it got past settings.
    code, err = _run(["replay", str(path), "--at=+5:00"], capsys)
    assert code == 2
    note, *rest = err.splitlines()
    assert note == _note(broken_here)
    assert len(rest) == 1 and rest[0].startswith("slotop replay: --at +5:00 is outside")


def test_a_broken_file_named_with_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    named = _broken_settings(tmp_path / "mine")
    # --at past the end as well: were the file let through, that would be the refusal instead.
    argv = ["replay", str(_recording(tmp_path)), "--config", str(named), "--at=+5:00"]
    code, err = _run(argv, capsys)
    assert code == 2
    assert err == (
        f"slotop: {named}: [slo] ttft_percentile = 120; expected between 0 and 100, exclusive\n"
    )


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_a_replay_beside_a_broken_settings_file_plays_the_recordings_slo(tmp_path: Path) -> None:
    here = tmp_path / "here"
    settings_file = _broken_settings(here)
    recorded = with_overrides(Settings(), {"slo.ttft_ms": 321.0, "slo.itl_ms": 43.0})
    path = _recording(tmp_path, recorded)
    # An empty XDG_CONFIG_HOME and no $SLOTOP_CONFIG: ./slotop.toml is the file slotop finds.
    command = (
        f"unset COLUMNS LINES SLOTOP_CONFIG; export XDG_CONFIG_HOME={tmp_path / 'no-config'}; "
        f"cd {here} && {sys.executable} -m slotop replay {path} --paused; "
        "echo SLOTOP-EXITED-$?; sleep 120"
    )
    term = Terminal(command, 160, 50)
    try:
        screen = term.wait_for(lambda s: "REPLAY" in s and "TTFT p99  < 321 ms" in s)
        assert "ITL p99   < 43.0 ms" in screen
        term.keys("q")
        after = term.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
        # The note stands above, on the terminal's own screen: it wraps at 160 columns.
        assert after.startswith(_note(settings_file)[:160])
    finally:
        term.close()
