"""A whole session on the simulated replica, then its recording: replayed, reported, the same.

The dashboard runs as `slotop demo` runs it (the real app, feed, spawned probe and recorder, the
simulated replica started and restarted by slotop): two concurrency steps, a KV-dtype restart
auto → fp8 through k, two more steps. Then the session has two configurations with curves of
their own and a before/after table; `slotop replay` shows the same views as the live panes
after the same lines of the recording; and `slotop report` writes its Markdown, PNGs and CSV.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import demo_launch_spec
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.config import Settings, settings_from_mapping
from slotop.tui.restarting import RestartAccess
from slotop.tui.run import build_app
from tests.support.replay_session import (
    check_replay,
    check_report,
    check_session,
    scripted_session,
)
from tests.support.vllm_replica import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SIM_ARGS = ("--model", "qwen2.5-0.5b", "--gpu", "l4", "--max-model-len", "2048")


def _settings(url: str) -> Settings:
    return settings_from_mapping(
        {
            "replica": {"url": url},
            "load": {"prompt_tokens": 256, "output_tokens": 24},
            "restart": {"min_requests": 6},
            "window": {"long_s": 30.0, "short_s": 10.0},
            "session": {"itl_gaps": True},  # every gap kept: the replay's numbers equal live ones
        },
        "the replay test",
    )


async def test_a_sim_session_replays_and_reports_as_it_was_seen(
    tmp_path: Path, no_strays: None
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    spec, dials = demo_launch_spec(url, SIM_ARGS, Path(tempfile.mkdtemp(dir=tmp_path)))
    replica = ManagedReplica(spec)
    replica.start(dials)
    settings = _settings(url)
    path = tmp_path / "session.jsonl"
    recorder = start_recording(command="demo", settings=settings, path=path)
    access = RestartAccess(replica, spec, "managed")
    app = build_app(
        settings,
        simulated=True,
        start_probe_at=2,
        restart_access=lambda: access,
        recorder=recorder,
    )
    try:
        session = await scripted_session(app, recorder, replica, first=2)
    finally:
        replica.stop()
        recorder.close()

    recording = read_recording(path)
    check_session(session, recording, first=2)
    await check_replay(recording, session)
    check_report(path, tmp_path / "report", {2, 3, 4, 5})
