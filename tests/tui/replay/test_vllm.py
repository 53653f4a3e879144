"""The replay's whole session on the real vLLM CPU replica: two steps, k auto → fp8 (bfloat16 on a
CPU whose vLLM refuses fp8), two steps; two configurations and a before/after table, a replay
equal to the live panes, a report.

The tiny dummy-weight Llama starts in some 20-30 s on two cores and restarts once; its requests
are short (64 tokens in, 16 out) so each step has its points within seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.config import settings_from_mapping
from slotop.tui.restarting import RestartAccess
from slotop.tui.run import build_app
from tests.support.replay_session import (
    check_replay,
    check_report,
    check_session,
    scripted_session,
)
from tests.support.vllm_replica import managed_spec, vllm_accepts_fp8_kv

pytestmark = [pytest.mark.anyio, pytest.mark.vllm, pytest.mark.slow]


async def test_a_vllm_session_replays_and_reports_as_it_was_seen(
    tiny_model_dir: Path, replica_log_dir: Path, tmp_path: Path, no_strays: None
) -> None:
    spec = managed_spec(
        tiny_model_dir, replica_log_dir / "replay-vllm.log", tmp_path / "managed.json"
    )
    replica = ManagedReplica(spec)
    replica.start(Dials("auto"))
    settings = settings_from_mapping(
        {
            "replica": {"url": spec.url},
            "load": {"prompt_tokens": 64, "output_tokens": 16},
            "restart": {"min_requests": 6},
            "window": {"long_s": 30.0, "short_s": 10.0},
            "session": {"itl_gaps": True},
        },
        "the vLLM replay test",
    )
    path = tmp_path / "session.jsonl"
    recorder = start_recording(command="attach", settings=settings, path=path)
    access = RestartAccess(replica, spec, "managed")
    app = build_app(settings, start_probe_at=1, restart_access=lambda: access, recorder=recorder)
    kv_dtype = "fp8" if vllm_accepts_fp8_kv() else "bfloat16"
    try:
        session = await scripted_session(app, recorder, replica, first=1, kv_dtype=kv_dtype)
    finally:
        replica.stop()
        recorder.close()

    recording = read_recording(path)
    check_session(session, recording, first=1, kv_dtype=kv_dtype)
    await check_replay(recording, session)
    check_report(path, tmp_path / "report", {1, 2, 3, 4}, kv_dtype=kv_dtype)
