"""`slotop web`'s command line: a help that teaches, the dashboard's command, clear refusals."""

from __future__ import annotations

import argparse
import importlib.resources
import socket
import sys
from pathlib import Path

import pytest

from slotop.cli import build_parser, main
from slotop.cli.web import app_command


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def parsed(*words: str) -> argparse.Namespace:
    return build_parser().parse_args(["web", *words])


def test_help_teaches_the_token_the_control_the_host_and_the_install(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["web", "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    for words in (
        "access token",
        "refused",
        "127.0.0.1",
        "--host HOST",
        "0.0.0.0",
        "plain HTTP",
        "ssh -L",
        "holds",
        "read-only",
        "since when",
        "smallest browser",
        "--demo",
        "--port PORT",
        "air-gapped",
        "textual-serve",
    ):
        assert words in out, words


def test_the_dashboard_served_is_slotop_attach_with_the_flags_it_shares() -> None:
    args = parsed("http://10.0.0.5:8000", "--allow-remote-load", "--no-record")
    args.config = Path("s.toml")
    argv = app_command(args, "http://10.0.0.5:8000")
    assert argv[:3] == [sys.executable, "-m", "slotop"]
    assert argv[3:] == [
        "attach",
        "http://10.0.0.5:8000",
        "--config",
        str(Path("s.toml").resolve()),
        "--no-record",
        "--allow-remote-load",
    ]


def test_the_demo_served_is_slotop_demo_with_its_flags() -> None:
    args = parsed("--demo", "--gpu", "a100-80gb", "--concurrency", "4")
    assert app_command(args, None)[3:] == ["demo", "--gpu", "a100-80gb", "--concurrency", "4"]


def test_a_url_and_demo_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "http://127.0.0.1:8000", "--demo"]) == 2
    assert "not both" in capsys.readouterr().err


def test_demo_flags_without_demo_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "http://127.0.0.1:8000", "--gpu", "h100-sxm"]) == 2
    assert "are for --demo" in capsys.readouterr().err


def test_without_textual_serve_it_says_what_to_install(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(package: str) -> object:
        raise ModuleNotFoundError(f"No module named {package!r}", name=package)

    monkeypatch.setattr(importlib.resources, "files", missing)
    assert main(["web", "http://127.0.0.1:8000"]) == 1
    err = capsys.readouterr().err
    assert "textual-serve" in err
    assert "pip install 'textual-serve==1.1.3'" in err


def test_a_port_in_use_is_said_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["web", "http://127.0.0.1:9", "--port", str(port)]) == 1
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in err
    assert "--port 0" in err
    assert "serving" not in err  # no address printed for a server that is not there


def test_a_host_not_on_this_machine_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["web", "http://127.0.0.1:9", "--host", "192.0.2.1", "--port", "0"]) == 1
    assert "this machine has no address '192.0.2.1'" in capsys.readouterr().err
