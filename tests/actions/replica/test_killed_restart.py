"""`kill -9` of a real `slotop restart` between the replica's stop and start, and between its
start and verify: the next `slotop launch`, `attach` or `restart` reads the state file, says what
happened (the dials the replica runs, whether it runs) and offers the way back, which works; the
killed session's recording reads to its last line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from slotop.actions.replica.journal import cut_restart
from slotop.actions.replica.spec import Dials, launch_spec_from_settings, read_restart
from slotop.actions.session.reader import read_recording
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.config import load_settings
from slotop.tui.run import attach_warnings
from tests.support.paths import STUB_REPLICA
from tests.support.vllm_replica import free_port, still_alive

pytestmark = pytest.mark.slow
WAIT_S = 60.0


class Scene:
    """A config naming a stub replica that stops and starts slowly, and slotop run on it."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.state = tmp_path / "state"
        self.config = tmp_path / "slotop.toml"
        command = [
            sys.executable,
            str(STUB_REPLICA),
            "--slow-stop",
            "3",
            "--slow-start-on",
            "fp8",
            "--slow-start",
            "4",
            "--model",
            "qwen2.5-0.5b",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        self.config.write_text(
            f'[replica]\nurl = "{self.url}"\n'
            f"[launch]\ncommand = {json.dumps(command)}\n"
            f'log_file = "{tmp_path / "replica.log"}"\nhealth_timeout_s = 60.0\n'
            "stop_grace_s = 20.0\n[session]\nrecord = false\n",
            encoding="utf-8",
        )
        self.env = {**os.environ, "XDG_STATE_HOME": str(self.state)}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "slotop", *args, "--config", str(self.config)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "slotop", *args, "--config", str(self.config)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )

    @property
    def state_path(self) -> Path:
        os.environ["XDG_STATE_HOME"] = str(self.state)
        return launch_spec_from_settings(load_settings(self.config)).state_path

    def phase(self) -> str | None:
        record = read_restart(self.state_path)
        return None if record is None else str(record.get("phase"))

    def dtype(self) -> str | None:
        with ReplicaClient(self.url, timeout_s=2.0) as client:
            return read_metrics_text(client.metrics_text()).cache_configs[0].cache_dtype

    def stop_all(self) -> None:
        self.run("launch", "--stop")


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Scene]:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    made = Scene(tmp_path)
    launched = made.run("launch", "--no-attach")
    assert launched.returncode == 0, launched.stdout + launched.stderr
    try:
        yield made
    finally:
        made.stop_all()


def _until(what: str, found: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not found():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.05)


def _kill_when(process: subprocess.Popen[str], what: str, found: Callable[[], bool]) -> None:
    try:
        _until(what, lambda: found() or process.poll() is not None)
        assert process.poll() is None, f"slotop ended before {what}"
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)


def _last_line(path: Path) -> dict[str, object]:
    rows = path.read_text(encoding="utf-8").splitlines(keepends=True)
    whole = [row for row in rows if row.endswith("\n")]
    data: dict[str, object] = json.loads(whole[-1])
    return data


def test_killed_between_stop_and_start_the_next_launch_says_so_and_puts_it_back(
    scene: Scene, tmp_path: Path
) -> None:
    record = tmp_path / "killed.jsonl"
    restart = scene.start("restart", "--kv-cache-dtype", "fp8", "--yes", "--record", str(record))
    log = tmp_path / "replica.log"
    _kill_when(restart, "the replica was asked to stop", lambda: "stopping, in" in log.read_text())
    spec_pid = json.loads(scene.state_path.read_text())["replica"]["pid"]
    _until("the replica stopped", lambda: not still_alive([spec_pid]))

    cut = cut_restart(scene.state_path)
    assert cut is not None and cut.before == Dials("auto") and cut.after == Dials("fp8")
    assert cut.phase in ("plan", "pause_probe", "drain")

    told = attach_warnings(load_settings(scene.config))  # what the dashboard opens with
    assert any(
        "a restart by `slotop restart`" in t
        and "kv_cache_dtype auto → fp8" in t
        and "the replica is not running" in t
        and str(record) in t
        for t in told
    ), told
    assert any("`slotop launch` starts it again on --kv-cache-dtype=auto" in t for t in told)

    restarted = scene.run("restart", "--yes")  # nothing runs: it says so, and what to do
    assert restarted.returncode != 0
    assert "the replica is not running" in restarted.stdout
    assert "start one with `slotop launch`" in restarted.stderr

    launched = scene.run("launch", "--no-attach")
    assert launched.returncode == 0, launched.stdout + launched.stderr
    assert "the replica is not running" in launched.stdout
    assert "starting it on the dials it ran before the cut restart: --kv-cache-dtype=auto" in (
        launched.stdout
    )
    assert scene.dtype() == "auto" and read_restart(scene.state_path) is None

    recording = read_recording(record)  # the killed session reads to its last line
    assert not recording.ended
    assert dict(recording.lines[-1].data) == _last_line(record)
    phases = [line.data["text"] for line in recording.of_kind("event")]
    assert any(str(text).startswith("plan:") for text in phases)


def test_killed_between_start_and_verify_the_next_restart_puts_it_back(
    scene: Scene, tmp_path: Path
) -> None:
    record = tmp_path / "killed.jsonl"
    restart = scene.start("restart", "--kv-cache-dtype", "fp8", "--yes", "--record", str(record))
    log = tmp_path / "replica.log"
    _kill_when(restart, "the new replica started", lambda: "starting slowly" in log.read_text())
    assert scene.phase() == "start"
    _until("the new replica serves", lambda: _answers(scene.url))
    assert scene.dtype() == "fp8"

    launched = scene.run("launch", "--no-attach")  # it runs: launch refuses, and says why
    assert launched.returncode != 0
    assert "after it started the replica with the new dials and before /health answered" in (
        launched.stdout
    )
    assert "--kv-cache-dtype=fp8, the new dials, never verified" in launched.stdout
    assert "`slotop restart` puts it back on --kv-cache-dtype=auto" in launched.stdout

    back = scene.run("restart", "--yes")  # no dial asked for: the way back
    assert back.returncode == 0, back.stdout + back.stderr
    assert "kv_cache_dtype: fp8 → auto" in back.stdout
    assert "Restarted with the new dials, verified" in back.stdout
    assert scene.dtype() == "auto" and cut_restart(scene.state_path) is None

    recording = read_recording(record)
    assert not recording.ended
    assert dict(recording.lines[-1].data) == _last_line(record)
    texts = [str(line.data["text"]) for line in recording.of_kind("event")]
    assert any(text.startswith("start: started with --kv-cache-dtype=fp8") for text in texts)


def _answers(url: str) -> bool:
    try:
        with ReplicaClient(url, timeout_s=1.0) as client:
            return client.health().healthy
    except Exception:
        return False
