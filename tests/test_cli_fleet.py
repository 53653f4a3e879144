"""`slotop fleet`'s command line: a help that teaches, and clear refusals before any query."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.cli import main


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def test_help_teaches_sources_columns_flags_and_credentials(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["fleet", "--help"])
    out = capsys.readouterr().out
    assert exited.value.code == 0
    for words in (
        "--prometheus URL",
        "histogram_quantile",
        "--discover",
        "never averaged",
        "slow_ratio",
        "bearer_token_file",
        "never",
        "Enter opens",
        "slotop.fleet/1",
    ):
        assert words in out, words


def test_no_source_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "--json"]) == 2
    assert "--prometheus URL" in capsys.readouterr().err


def test_urls_and_prometheus_together_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "http://h:1", "--prometheus", "http://p:9090", "--json"]) == 2
    assert "one of them" in capsys.readouterr().err


def test_credentials_in_the_url_are_refused_unseen(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fleet", "--prometheus", "http://ops:hunter2@p:9090", "--json"]) == 2
    err = capsys.readouterr().err
    assert "hunter2" not in err and "basic_auth_file" in err


def test_a_missing_token_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "slotop.toml"
    config.write_text('[fleet]\nbearer_token_file = "/nonexistent/token"\n', encoding="utf-8")
    code = main(["fleet", "--config", str(config), "--prometheus", "http://p:9090", "--json"])
    assert code == 2
    assert "/nonexistent/token" in capsys.readouterr().err


def test_an_unreachable_server_is_json_that_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(["fleet", "--prometheus", "http://127.0.0.1:9", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["schema"] == "slotop.fleet/1" and "cannot connect" in data["error"]
    assert data["replicas"] == []


@pytest.mark.parametrize(
    ("toml", "words"),
    [
        (
            'bearer_token_file = "/t"\nbearer_token_env = "T"',
            "sets both bearer_token_file and bearer_token_env",
        ),
        (
            'bearer_token_env = "T"\nbasic_auth_env = "B"',
            "names both a bearer token and basic auth",
        ),
        ('model_label = "instance"', "model_label = 'instance' is also in replica_labels"),
        ('replica_labels = ["engine"]', "not le, engine, pid or __name__"),
        ("replica_labels = []", "at least one Prometheus label name"),
        ('prometheus_url = "http://ops:pw@p:9090"', "without a user or password"),
        ("slow_ratio = 1", "greater than 1"),
        ('bearer_token_env = "not a name"', "an environment variable name"),
    ],
)
def test_fleet_settings_are_checked_with_clear_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, words: str
) -> None:
    config = tmp_path / "slotop.toml"
    config.write_text(f"[fleet]\n{toml}\n", encoding="utf-8")
    assert main(["fleet", "--config", str(config), "--json"]) == 2
    err = capsys.readouterr().err
    assert str(config) in err and words in err


def test_replicas_that_all_fail_are_json_that_says_so_and_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from tests.support.vllm_replica import free_port

    dead = [f"http://127.0.0.1:{free_port()}", f"http://127.0.0.1:{free_port()}"]
    assert main(["fleet", *dead, "--json", "--window", "0.1"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["replicas_answered"] == 0
    assert [row["answered"] for row in data["replicas"]] == [False, False]
    assert data["error"].startswith("none of the 2 replicas answered: cannot connect to")


def test_help_names_each_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["fleet", "--help"])
    out = capsys.readouterr().out
    assert "exit status" in out and "no replica answered" in out and "2  a usage" in out


@pytest.mark.slow
def test_a_replica_given_as_the_prometheus_server_is_named_as_not_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import contextlib
    import json

    from tests.support.sim_replica import run_sim

    with contextlib.contextmanager(run_sim)() as replica_url:
        assert main(["fleet", "--prometheus", replica_url, "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"{replica_url} does not answer the Prometheus HTTP API")
    assert "HTTP 404" in error and "without --prometheus" in error
