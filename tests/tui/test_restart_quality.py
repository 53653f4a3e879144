"""A dashboard restart's quality check is recorded whole, as data, and the report shows it.

The replica is the simulated one, started and restarted by slotop (the stub command), with the
load off, so k runs the greedy check around the KV-dtype change; two prompts from a file of the
test's own, so the check's size is known from outside the code.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.report.build import build_report
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.config import LaunchSettings, ReplicaSettings, Settings
from slotop.tui.app import SlotopApp
from slotop.tui.restarting import RestartAccess
from tests.support.paths import STUB_REPLICA
from tests.support.vllm_replica import free_port

pytestmark = [pytest.mark.slow, pytest.mark.anyio]


async def test_the_quality_check_of_a_dashboard_restart_is_recorded_and_reported(
    tmp_path: Path, no_strays: None
) -> None:
    port = free_port()
    spec = LaunchSpec(
        url=f"http://127.0.0.1:{port}",
        command=(sys.executable, str(STUB_REPLICA), "--host", "127.0.0.1", "--port", str(port)),
        log_path=tmp_path / "replica.log",
        state_path=tmp_path / "state.json",
        health_timeout_s=30.0,
        stop_grace_s=2.0,
        drain_timeout_s=5.0,
    )
    replica = ManagedReplica(spec)
    replica.start(Dials("auto", 64))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        '{"name": "hi", "prompt": "hello there", "max_tokens": 4}\n{"prompt": [7, 8, 9]}\n',
        encoding="utf-8",
    )
    settings = Settings(
        replica=ReplicaSettings(url=replica.url),
        launch=LaunchSettings(quality_prompts_file=str(prompts)),
    )
    access = RestartAccess(replica, replica.spec, "managed")
    path = tmp_path / "s.jsonl"
    recorder = start_recording(command="attach", settings=settings, path=path)
    app = SlotopApp(settings, restart_access=lambda: access, recorder=recorder)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("k")
            await pilot.press("down", "down", "down", "enter")  # auto, bfloat16, float16, fp8
            await pilot.press("y")
            deadline = time.monotonic() + 90.0
            while not any(e.kind == "quality" for e in app.inputs.events):
                assert time.monotonic() < deadline, "no quality check reached the timeline"
                await pilot.pause(0.1)
            assert replica.dials == Dials("fp8", 64)
            await pilot.press("q")
    finally:
        replica.stop()
        recorder.close()
    recording = read_recording(path)
    actions = [line.data for line in recording.of_kind("action")]
    names = [data["action"] for data in actions]
    assert names.count("restart") == 1 and names.index("restart") < names.index("restart_quality")
    quality = actions[names.index("restart_quality")]["quality"]
    assert quality["not_run"] is None and quality["prompts_total"] == 2
    assert [p["name"] for p in quality["prompts"]] == ["hi", "line-2"]  # unnamed: its line
    markdown = build_report(recording, str(path)).markdown
    restart = markdown.split("### Restart 1:")[1].split("\n## ")[0]
    assert "Quality check (2 greedy prompts before and after; tokens as " in restart
    assert f"| identical outputs | {quality['prompts_identical']} of 2 |" in restart
