"""Real `slotop sweep` processes record: no secret reaches the file, and kill -9 loses under a second."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotop.actions.session.reader import parse_lines, read_recording
from slotop.actions.session.rebuild import snapshots
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

API_KEY = "sk-fake-0123456789abcdef"
LAUNCH_KEY = "sk-fake-launch-fedcba9876"
ENV_SECRET = "hf-fake-env-5555"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    yield from run_sim()


def _sweep(url: str, record: Path, *flags: str, config: Path | None = None) -> list[str]:
    argv = [sys.executable, "-m", "slotop", "sweep", url, "--record", str(record), *flags]
    return [*argv, "--config", str(config)] if config is not None else argv


def test_no_secret_reaches_the_recording(sim_url: str, tmp_path: Path, no_strays: None) -> None:
    config = tmp_path / "slotop.toml"
    config.write_text(
        '[replica]\napi_key_env = "SLOTOP_TEST_KEY"\n'
        f'[launch]\ncommand = ["vllm", "serve", "m", "--api-key", "{LAUNCH_KEY}"]\n'
        f'env = {{ HF_TOKEN = "{ENV_SECRET}" }}\n',
        encoding="utf-8",
    )
    record = tmp_path / "sweep.jsonl"
    flags = ("--concurrency", "1", "--dwell-s", "1", "--warmup-s", "0", "--min-requests", "1")
    done = subprocess.run(
        _sweep(sim_url, record, *flags, config=config),
        env={**os.environ, "SLOTOP_TEST_KEY": API_KEY},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 3), done.stderr
    assert f"recording this session to {record}" in done.stderr
    text = record.read_text(encoding="utf-8")
    for secret in (API_KEY, LAUNCH_KEY, ENV_SECRET, "Bearer"):
        assert secret not in text
    recording = read_recording(record)
    assert recording.ended and recording.header.command == "sweep"
    assert recording.header.settings["launch"]["env"] == {"HF_TOKEN": "<redacted>"}
    kinds = {line.kind for line in recording.lines}
    assert {"monitor", "reading", "probe_records", "probe_event", "action", "end"} <= kinds
    actions = [line.data["action"] for line in recording.of_kind("action")]
    assert actions == ["sweep_step", "sweep_result"]
    assert list(snapshots(recording))


def test_kill_9_loses_at_most_the_last_second(
    sim_url: str, tmp_path: Path, no_strays: None
) -> None:
    record = tmp_path / "killed.jsonl"
    flags = ("--concurrency", "1,2", "--dwell-s", "60", "--warmup-s", "0")
    process = subprocess.Popen(
        _sweep(sim_url, record, *flags),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the probe process goes down with it
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if record.exists() and record.read_text().count('"kind":"reading"') >= 4:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the sweep recorded no readings within 60 s")
        time.sleep(1.3)  # mid-way between two ticks
        killed_at = time.time()
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    recording = read_recording(record)
    assert not recording.ended
    assert killed_at - recording.last_t_s <= 1.0 + 0.3  # a tick, and a little scheduling slack
    assert len(list(snapshots(recording))) >= 4

    # A write cut mid-line by the kill: the reader goes on up to the line before, with a note.
    lines = record.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = parse_lines([*lines, lines[-1][: len(lines[-1]) // 2]], str(record))
    assert cut.lines == recording.lines
    assert cut.notes and "the last line is cut short" in cut.notes[0]
