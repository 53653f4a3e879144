"""No secret is shown or kept: a unique secret in every place a user can put one, every command
run against the simulated replica and a real Prometheus with failures provoked (a refused
connection, a 401, a failed restart, a server that echoes the credentials it got), and then
stdout, stderr, the screen, every recording, report, sweep and tune JSON and slotop's own log
lines are searched for each: not one is found.

The places: the password of [replica] url and of a URL argument; VLLM_API_KEY (api_key_env);
the fleet's bearer token and basic auth, each from a file and from a variable; [launch] env
values; `--hf-token X` and `token=X` in [launch] command, `token=X` in restart_command. The
replica's command prints its arguments and environment to its log, as vLLM's start-up does, so
the log tail a failed restart shows holds them all unless slotop hides them.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import open_recording, record_choice
from slotop.actions.wiring.replica import with_url
from slotop.config import load_settings
from slotop.tui.replay.app import ReplayApp
from slotop.tui.run import attach_warnings, build_app
from tests.support.http_answers import Answer, Request, http_answers
from tests.support.paths import STUB_REPLICA
from tests.support.pilot import wait_until
from tests.support.prometheus_server import run_prometheus
from tests.support.vllm_replica import free_port

pytestmark = pytest.mark.slow

SECRETS = {
    "replica url password": "urlpass-b7Kq2x",
    "URL argument password": "argpass-Zt4m9w",
    "VLLM_API_KEY": "apikey-Hs83nd",
    "[launch] env value": "envtoken-Qp21vc",
    "--hf-token in [launch] command": "cmdtoken-Lw06rf",
    "token= in [launch] command": "cmdtoken-Xy55aa",
    "token= in restart_command": "rsttoken-Mm92kk",
    "fleet bearer token file": "bearerfile-Tt61qe",
    "fleet bearer token variable": "bearerenv-Rr40uw",
    "fleet basic auth file": "basicfile-Pp17zo",
    "fleet basic auth variable": "basicenv-Nn28xi",
}


def _hits(text: str) -> list[str]:
    return [where for where, secret in SECRETS.items() if secret in text]


class World:
    """The replica slotop launched, its settings, and everything the commands printed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.arg_url = f"http://ops:{SECRETS['URL argument password']}@127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "XDG_STATE_HOME": str(root / "state"),
            "VLLM_API_KEY": SECRETS["VLLM_API_KEY"],
        }
        self.outputs: dict[str, str] = {}
        command = [
            sys.executable,
            str(STUB_REPLICA),
            "--say-args",
            "--exit-on",
            "fp8",
            "--hf-token",
            SECRETS["--hf-token in [launch] command"],
            f"token={SECRETS['token= in [launch] command']}",
            "--model",
            "qwen2.5-0.5b",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self.config = root / "slotop.toml"
        self.config.write_text(
            "[replica]\n"
            f'url = "http://ops:{SECRETS["replica url password"]}@127.0.0.1:{self.port}"\n'
            "timeout_s = 10.0\n"
            "[launch]\n"
            f"command = {json.dumps(command)}\n"
            f'env = {{ VLLM_API_KEY = "{SECRETS["VLLM_API_KEY"]}", '
            f'HF_TOKEN = "{SECRETS["[launch] env value"]}" }}\n'
            f'log_file = "{root / "replica.log"}"\n'
            "health_timeout_s = 120.0\nstop_grace_s = 5.0\n"
            "[sweep]\nconcurrency = [1]\nwarmup_s = 0.0\ndwell_s = 1.0\nmin_requests = 1\n"
            "max_dwell_s = 5.0\n"
            '[tune]\nbudget_min = 2.0\nmax_candidates = 1\ndials = ["kv_cache_dtype"]\n'
            f'[session]\nfolder = "{root / "sessions"}"\n',
            encoding="utf-8",
        )

    def run(self, name: str, *args: str, env: dict[str, str] | None = None) -> int:
        done = subprocess.run(
            [sys.executable, "-m", "slotop", *args],
            env={**self.env, **(env or {})},
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=300,
        )
        self.outputs[f"{name} stdout"] = done.stdout
        self.outputs[f"{name} stderr"] = done.stderr
        return done.returncode


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    made = World(tmp_path_factory.mktemp("secrets"))
    assert made.run("launch", "launch", "--no-attach", "--config", str(made.config)) == 0, (
        made.outputs
    )
    try:
        yield made
    finally:
        made.run("launch --stop", "launch", "--stop", "--config", str(made.config))


def _echo_credentials(request: Request) -> Answer:
    """A server that refuses, quoting the credentials it was sent (as a careless proxy does)."""
    said = request.headers.get("authorization", "none")
    return Answer(
        401 if "prometheus" in request.path or "api" in request.path else 500,
        f"who are you? you said {said}".encode(),
    )


def test_no_command_shows_or_keeps_a_secret(world: World, tmp_path: Path) -> None:
    config, root = str(world.config), world.root
    closed = f"http://ops:{SECRETS['URL argument password']}@127.0.0.1:{free_port()}"

    # The managed replica: launched again (refused, it runs), a restart that fails and rolls back.
    assert world.run("launch again", "launch", "--no-attach", "--config", config) != 0
    restart = root / "restart.jsonl"
    code = world.run(
        "restart", "restart", "--kv-cache-dtype", "fp8", "--yes", "--record", str(restart),
        "--config", config,
    )  # fmt: skip
    assert code == 1
    assert "ROLLED BACK" in world.outputs["restart stdout"], world.outputs["restart stdout"]
    assert "refusing --kv-cache-dtype=fp8" in world.outputs["restart stdout"]  # the log tail
    assert "<redacted>" in world.outputs["restart stdout"]  # ... with what the replica echoed

    # Snapshots: a 401 (no key, a password in the URL), a refused connection, an echoing server.
    assert world.run("snapshot 401", "snapshot", world.arg_url, env={"VLLM_API_KEY": ""}) == 0
    assert "HTTP 401" in world.outputs["snapshot 401 stdout"]
    assert world.run("snapshot refused", "snapshot", closed) != 0
    with http_answers(_echo_credentials) as echo:
        assert world.run("snapshot echo", "snapshot", echo.url, "--config", config) != 0
        assert "HTTP 500" in world.outputs["snapshot echo stderr"]

        # The fleet: every credential source against a server that echoes what it got, and
        # against a real Prometheus (one for all four: it asks for no credentials itself).
        for prometheus in run_prometheus([f"127.0.0.1:{world.port}"], interval_s=0.5):
            prometheus.wait_for_up(1)
            for name, setting, value, env in (
                ("bearer file", "bearer_token_file", "fleet bearer token file", None),
                ("bearer env", "bearer_token_env", "fleet bearer token variable", "BEARER"),
                ("basic file", "basic_auth_file", "fleet basic auth file", None),
                ("basic env", "basic_auth_env", "fleet basic auth variable", "BASIC"),
            ):
                secret = SECRETS[value] if "bearer" in name else f"ops:{SECRETS[value]}"
                fleet_config = tmp_path / f"fleet-{setting}.toml"
                if env is None:
                    (tmp_path / setting).write_text(secret + "\n")
                    line = f'{setting} = "{tmp_path / setting}"'
                else:
                    line = f'{setting} = "{env}"'
                fleet_config.write_text(f"[fleet]\n{line}\n")
                extra = {env: secret} if env is not None else {}
                argv = ["fleet", "--prometheus", echo.url, "--json", "--config", str(fleet_config)]
                assert world.run(f"fleet {name} echo", *argv, env=extra) == 1
                assert "401" in world.outputs[f"fleet {name} echo stdout"]
                argv[2] = prometheus.url
                assert world.run(f"fleet {name}", *argv, env=extra) == 0
    assert world.run("fleet direct", "fleet", world.arg_url, "--json") == 2

    # A sweep with a password in its URL argument (the key from the variable wins), and one
    # against nothing; then a tune of the managed replica.
    sweep_json, sweep_csv, sweep_record = root / "sweep.json", root / "sweep.csv", root / "s.jsonl"
    code = world.run(
        "sweep", "sweep", world.arg_url, "--json", str(sweep_json), "--csv", str(sweep_csv),
        "--record", str(sweep_record), "--config", config,
    )  # fmt: skip
    assert code == 0, world.outputs["sweep stderr"]
    assert world.run("sweep refused", "sweep", closed, "--config", config) != 0
    code = world.run(
        "tune", "tune", "--yes", "--json", "--record", str(root / "tune.jsonl"), "--config", config
    )
    assert code in (0, 3), world.outputs["tune stderr"]

    # Reports of what was recorded.
    for recording in (restart, sweep_record):
        out = root / f"{recording.stem}-report"
        assert (
            world.run(f"report {recording.name}", "report", str(recording), "--out", str(out)) == 0
        )

    searched = _search_outputs(world)
    assert searched["commands"] >= 20 and searched["files"] >= 10, searched


@pytest.fixture
def anyio_backend() -> str:
    """Pilot runs on asyncio, Textual's loop."""
    return "asyncio"


@pytest.mark.anyio
async def test_the_screen_shows_no_secret(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The dashboard (attach, a URL with a password, a failed restart from k) and a replay."""
    monkeypatch.setenv("XDG_STATE_HOME", str(world.root / "state"))
    monkeypatch.setenv("VLLM_API_KEY", SECRETS["VLLM_API_KEY"])
    settings = with_url(load_settings(world.config), world.arg_url)
    recorder = open_recording(record_choice(settings, None, False), command="attach",
                              settings=settings)  # fmt: skip
    assert recorder is not None
    app = build_app(settings, recorder=recorder, warnings=attach_warnings(settings))
    screens: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await _until(pilot, lambda: app.views is not None and app.views.header.state == "fresh")
        screens.append(_screen(app))
        await pilot.press("k")
        await _until(pilot, lambda: "fp8_e4m3" in _screen(app))
        await pilot.press("down", "down", "down", "enter")
        await _until(pilot, lambda: "Restart the replica?" in _screen(app))
        screens.append(_screen(app))
        await pilot.press("y")
        await _until(pilot, lambda: any("ROLLED BACK" in e.text for e in app.inputs.events), 90)
        await pilot.pause(0.5)
        screens.append(_screen(app))
        screens += [e.text for e in app.inputs.events]
        screens += [str(n.message) for n in app._notifications]
        await pilot.press("q")
    recorder.close()
    assert any("carries a password" in text for text in screens)  # the warning was shown

    replay = ReplayApp(read_recording(recorder.path), settings)
    async with replay.run_test(size=(160, 50)) as pilot:
        await pilot.press("end")
        await pilot.pause(1.0)
        screens.append(_screen(replay))
        await pilot.press("q")
    for text in screens:
        assert not _hits(text), (_hits(text), text)
    assert not _hits(recorder.path.read_text())


async def _until(pilot: Any, condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    await wait_until(pilot, condition, timeout_s, step_s=0.2)


def _screen(app: Any) -> str:
    """Every character on the app's screen, as text."""
    svg = app.export_screenshot()
    return html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")


def _search_outputs(world: World) -> dict[str, int]:
    """Search every command's output and every file the commands left; the number searched."""
    for name, text in world.outputs.items():
        assert not _hits(text), (name, _hits(text), text)
    inputs = {world.config.resolve(), (world.root / "replica.log").resolve()}
    files = [
        path for path in world.root.rglob("*") if path.is_file() and path.resolve() not in inputs
    ]
    files += list(Path(world.env["XDG_STATE_HOME"]).rglob("*.json"))
    for path in files:
        data = path.read_bytes()
        for where, secret in SECRETS.items():
            assert secret.encode() not in data, (str(path), where)
    log = (world.root / "replica.log").read_text()
    assert SECRETS["[launch] env value"] in log  # the replica printed them: they were there
    for line in log.splitlines():
        if line.startswith("=== slotop"):  # what slotop itself writes to the log
            assert not _hits(line), line
    return {"commands": len(world.outputs), "files": len(files)}
