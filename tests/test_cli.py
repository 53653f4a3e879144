"""The command line: help that teaches, version, settings errors as exit code 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from slotop import __version__
from slotop.actions.session.recorder import RecordChoice
from slotop.cli import EXIT_USAGE, main
from slotop.config import SAMPLE_PATH, Settings


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"slotop {__version__}"


def test_help_lists_every_subcommand_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("sim", "snapshot", "sample-config"):
        assert f"    {command}" in out
    assert "examples:" in out


@pytest.mark.parametrize(
    ("argv", "url"),
    [
        ([], None),
        (["http://127.0.0.1:8001"], "http://127.0.0.1:8001"),
        (["attach", "127.0.0.1:8002"], "127.0.0.1:8002"),
    ],
)
def test_bare_slotop_and_a_url_mean_attach(
    argv: list[str], url: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slotop.tui.run

    seen: list[str | None] = []
    monkeypatch.setattr(
        slotop.tui.run, "attach", lambda settings, given, **_: seen.append(given) or 0
    )
    assert main(argv) == 0
    assert seen == [url]


def test_sample_config_prints_the_sample_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sample-config"]) == 0
    assert capsys.readouterr().out == SAMPLE_PATH.read_text(encoding="utf-8")


def test_a_bad_settings_file_is_exit_2_with_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[slo]\nttft_percentile = 120\n", encoding="utf-8")
    assert main(["sample-config", "--config", str(bad)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert str(bad) in err
    assert "ttft_percentile = 120" in err


@pytest.mark.slow
def test_python_dash_m_slotop_runs() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "slotop", "--version"], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0
    assert result.stdout.strip() == f"slotop {__version__}"


@pytest.mark.parametrize(("flag", "allowed"), [([], False), (["--allow-remote-load"], True)])
def test_attach_takes_the_remote_load_decision_from_its_flag(
    flag: list[str], allowed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import slotop.tui.run

    seen: list[bool] = []

    def attach(settings: Settings, url: str | None, **_: object) -> int:
        seen.append(settings.load.allow_remote_load)
        return 0

    monkeypatch.setattr(slotop.tui.run, "attach", attach)
    assert main(["attach", "http://10.0.0.7:8000", *flag]) == 0
    assert seen == [allowed]


@pytest.mark.parametrize(
    ("flags", "choice"),
    [
        ([], RecordChoice(True, None)),
        (["--record", "s.jsonl"], RecordChoice(True, Path("s.jsonl"))),
        (["--no-record"], RecordChoice(False)),
    ],
)
def test_attach_records_unless_told_not_to(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], choice: RecordChoice
) -> None:
    import slotop.tui.run

    seen: list[object] = []

    def attach(settings: Settings, url: str | None, *, record: RecordChoice) -> int:
        seen.append(record)
        return 0

    monkeypatch.setattr(slotop.tui.run, "attach", attach)
    assert main(["attach", "http://127.0.0.1:8000", *flags]) == 0
    assert seen == [choice]


@pytest.mark.parametrize(
    ("flags", "sim_args"),
    [
        ([], ["--gpu", "h100-sxm", "--model", "llama-3.1-8b"]),
        (
            ["--engine", "sglang", "--gpu", "h200", "--", "--max-running-requests", "64"],
            [
                *("--engine", "sglang", "--enable-metrics", "--gpu", "h200"),
                *("--model", "llama-3.1-8b", "--max-running-requests", "64"),
            ],
        ),
    ],
)
def test_demo_starts_the_sim_speaking_the_engine_asked_for(
    monkeypatch: pytest.MonkeyPatch, flags: list[str], sim_args: list[str]
) -> None:
    import slotop.tui.run

    seen: list[list[str]] = []

    def demo(settings: Settings, args: list[str], concurrency: int | None, **_: object) -> int:
        seen.append(list(args))
        return 0

    monkeypatch.setattr(slotop.tui.run, "demo", demo)
    assert main(["demo", "--no-record", *flags]) == 0
    assert seen == [sim_args]


@pytest.mark.parametrize("command", ["attach", "demo", "launch", "sweep", "restart"])
def test_recording_commands_say_where_the_file_goes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert "--no-record" in words
    assert "$XDG_STATE_HOME/slotop/sessions (~/.local/state/slotop/sessions when unset;" in words


@pytest.mark.parametrize("command", ["attach", "fleet", "replay", "report", "sweep"])
def test_config_help_names_every_place_settings_are_read_from(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    words = " ".join(capsys.readouterr().out.split())
    assert "$SLOTOP_CONFIG" in words
    assert "./slotop.toml and $XDG_CONFIG_HOME/slotop/slotop.toml (~/.config when unset)" in words


@pytest.mark.parametrize("command", ["fleet", "snapshot"])
def test_the_scrape_interval_default_is_named_as_the_settings_file_names_it(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert "(default: [replica] scrape_interval_s)" in " ".join(capsys.readouterr().out.split())
