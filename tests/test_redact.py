"""Secrets kept out of what slotop shows: URLs, command lines and free text, table by table."""

from __future__ import annotations

import json
import sys

import pytest

from slotop.cli.common import scrubbed_output
from slotop.config import FleetSettings, LaunchSettings, ReplicaSettings, Settings, secret_values
from slotop.redact import (
    REDACTED,
    Scrubber,
    argv_secrets,
    password_warning,
    redact_argv,
    shown_text,
    shown_url,
    url_password,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://u:pw@127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("https://user@host/v1", "https://host/v1"),
        ("http://u:p@ss@h:1/x", "http://h:1/x"),  # an unescaped @ in the password
        ("u:pw@127.0.0.1:8000", "127.0.0.1:8000"),  # no scheme, as typed
        ("http://[::1]:8000", "http://[::1]:8000"),
        ("http://h:1/metrics?api_key=s3cret&x=1", f"http://h:1/metrics?api_key={REDACTED}&x=1"),
        ("http://h:1/x?access_token=t", f"http://h:1/x?access_token={REDACTED}"),
        ("http://h:1/x?tokens=4", "http://h:1/x?tokens=4"),
        ("https://h:1/x", "https://h:1/x"),
        ("not a url", "not a url"),
    ],
)
def test_a_url_is_shown_without_user_info_or_secret_parameters(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["vllm", "serve", "m", "--api-key", "s3"], ["vllm", "serve", "m", "--api-key", REDACTED]),
        (["vllm", "--api-key=s3", "--port", "8"], ["vllm", f"--api-key={REDACTED}", "--port", "8"]),
        (["x", "--hf-token", "t"], ["x", "--hf-token", REDACTED]),
        (["x", "--api-keys-file", "f"], ["x", "--api-keys-file", "f"]),
        (["x", "token=abc", "TOKEN=1"], ["x", f"token={REDACTED}", f"TOKEN={REDACTED}"]),
        (["x", "HF_TOKEN=abc", "MODEL=m"], ["x", f"HF_TOKEN={REDACTED}", "MODEL=m"]),
        (["x", "--max-num-batched-tokens", "256"], ["x", "--max-num-batched-tokens", "256"]),
        (["x", "--tokenizer", "t"], ["x", "--tokenizer", "t"]),
        (["x", "--no-auth", "--port", "8"], ["x", "--no-auth", "--port", "8"]),  # a bare flag
        (["x", "--url=http://u:pw@h:1"], ["x", "--url=http://h:1"]),
        (["curl", "https://u:pw@h/x"], ["curl", "https://h/x"]),
        (["x", "--password", "p w"], ["x", "--password", REDACTED]),
    ],
)
def test_secret_arguments_are_hidden(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


def test_the_secrets_of_a_command_line_are_the_values_it_hides() -> None:
    argv = ["v", "--api-key", "A", "--hf-token=B", "token=C", "http://u:D@h", "--port", "8"]
    assert argv_secrets(argv) == ["A", "B", "C", "D"]
    assert url_password("http://u:p%40ss@h") == "p@ss"
    assert url_password("http://h:1") is None


def test_a_scrubber_replaces_each_secret_plain_and_json_escaped() -> None:
    scrub = Scrubber(["s3cret-value", 'quo"ted-secret', "short", "1234567", None])
    text = "x s3cret-value y " + json.dumps({"k": 'quo"ted-secret'}) + " short 1234567"
    assert scrub(text) == f'x {REDACTED} y {{"k": "{REDACTED}"}} short 1234567'
    assert not Scrubber(["abc", "99999999"])  # too short, or a number: never searched for
    assert (Scrubber(["aaaaaaa1"]) | Scrubber(["bbbbbbb2"]))("aaaaaaa1 bbbbbbb2") == (
        f"{REDACTED} {REDACTED}"
    )


def test_settings_name_every_secret_they_hold(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    token = tmp_path / "token"
    token.write_text("file-bearer-token\n")
    settings = Settings(
        replica=ReplicaSettings(url="http://u:url-password@h:1", api_key="the-api-key"),
        launch=LaunchSettings(
            command=("vllm", "--api-key", "launch-arg-key"),
            env=(("ANY_NAME", "env-value-1"),),
            restart_command=("ssh", "h", "token=restart-token"),
        ),
        fleet=FleetSettings(bearer_token_file=str(token), basic_auth_env="BASIC"),
    )
    monkeypatch.setenv("BASIC", "user:basic-password")
    assert set(secret_values(settings)) == {
        "url-password",
        "the-api-key",
        "launch-arg-key",
        "env-value-1",
        "restart-token",
        "file-bearer-token",
        "user:basic-password",
        "basic-password",
    }


def test_a_url_with_a_password_warns_with_the_safer_setting() -> None:
    warning = password_warning("http://ops:pw@h:8000")
    assert warning is not None and "[replica] api_key_env" in warning and "pw" not in warning
    assert password_warning("http://h:8000") is None
    assert password_warning("http://user@h:8000") is None  # a user alone is no secret


def test_free_text_loses_the_user_info_of_every_url_in_it() -> None:
    text = "ConnectError: http://u:pw@h:1/v1 and https://x:y@z/ refused"
    assert shown_text(text) == "ConnectError: http://h:1/v1 and https://z/ refused"


def test_a_scrubbed_stream_hides_secrets_and_is_otherwise_the_stream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with scrubbed_output(Scrubber(["hunter2-secret"])):
        print("the key is hunter2-secret")
        print("to stderr hunter2-secret", file=sys.stderr)
        assert sys.stdout.isatty() is False
    out, err = capsys.readouterr()
    assert out == f"the key is {REDACTED}\n" and err == f"to stderr {REDACTED}\n"
