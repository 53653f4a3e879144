"""`slotop tune`'s command line: the help teaches the method, bad flags and recordings are refused
with what to do, and nothing restarts without an answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.actions.session.recorder import start_recording
from slotop.cli import main
from slotop.config import Settings


def test_the_help_teaches_the_method_and_its_guards(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for words in (
        "KV capacity binds → fp8",
        "the sequence cap binds → a",
        "ITL breaks while TTFT holds → a lower",
        "the SLO itself binds with headroom elsewhere → stop",
        "--budget-min",
        "--resume FILE goes on",
        "schema slotop.tune/1",
    ):
        assert words in " ".join(text.split()), words


@pytest.mark.parametrize("value", ["kv,bogus", "", "seqs,max_num_seqz"])
def test_dials_it_does_not_know_are_refused_by_name(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["tune", "--dials", value])
    assert exit_info.value.code == 2
    assert "expected dials from kv, seqs, mbt" in capsys.readouterr().err


def test_resuming_a_recording_without_a_tune_is_refused_with_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "sweep.jsonl"
    recorder = start_recording(command="sweep", settings=Settings(), path=path)
    recorder.close()
    assert main(["tune", "--resume", str(path), "--yes"]) == 1
    assert f"slotop: {path}: holds no tune (no tune_started action)" in capsys.readouterr().err


def test_without_a_terminal_or_yes_nothing_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config = tmp_path / "slotop.toml"
    config.write_text('[launch]\nrestart_command = ["true", "{dial_args}"]\n', encoding="utf-8")
    assert main(["tune", "--config", str(config), "--no-record"]) == 1
    out = capsys.readouterr().out
    assert "Tune http://127.0.0.1:8000, now --kv-cache-dtype=auto" in out
    assert "give --yes to tune" in out and "not tuned" in out
