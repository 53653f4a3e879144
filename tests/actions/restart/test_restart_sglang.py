"""Restarts of a real SGLang CPU server through slotop's own [launch] machinery, verified from
what the server says of itself at /get_server_info.

Each start takes some 30 s on two cores, so one test launches once and restarts twice: a
verified cap on running requests, and a KV dtype SGLang refuses on CPU, rolled back.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, launch_spec_from_settings
from slotop.actions.restart.apply import RestartResult, apply_restart, plan_restart
from slotop.actions.restart.verify import replica_verifier
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import kv_cache_state
from slotop.config import settings_from_mapping
from tests.support.sglang_replica import FP8_REFUSED, managed_sglang_settings
from tests.support.vllm_replica import drive_load

pytestmark = [
    pytest.mark.sglang,
    pytest.mark.slow,
    # three SGLang starts: 370 to 505 s in full runs on three workers, and past the suite's 600 s
    # once on four, where a start waited 106 s and was killed
    pytest.mark.timeout(900),
]

SGLANG_FP8_REASON = "ValueError: --kv-cache-dtype fp8_e5m2 is not supported on CPU."
"""SGLang 0.5.23's own words when it refuses fp8_e5m2 (tests/fixtures/metrics/*-fp8-startup.log)."""


def _restart(replica: ManagedReplica, after: Dials) -> RestartResult:
    before = replica.dials
    assert before is not None
    with ReplicaClient(replica.url) as client:
        kv = kv_cache_state(read_metrics_text(client.metrics_text(), engine="sglang"))
    plan = plan_restart(
        before,
        after,
        url=replica.url,
        how="managed",
        kv=kv,
        last_downtime_s=replica.last_downtime_s,
        probe_status=None,
        drain_timeout_s=5.0,
        health_timeout_s=replica.spec.health_timeout_s,
        model_dtype="float32",
    )
    result = apply_restart(plan, replica, replica_verifier(replica.url, api_key=None))
    print("\n".join(result.lines()))
    return result


def _most_running_and_queued(url: str, streams: int) -> tuple[int, int]:
    """Keep `streams` streaming requests in flight (one each) and ask SGLang's scheduler how
    many it runs and queues (`/v1/loads`, exact when asked; its gauges lag) until they end; the
    most of each seen."""
    load = threading.Thread(
        target=drive_load,
        kwargs={
            "url": url,
            "concurrency": streams,
            "requests": streams,
            "max_tokens": 96,
            "prompt_tokens": 32,
        },
        daemon=True,
    )
    running = queued = 0
    load.start()
    with ReplicaClient(url) as client:
        while load.is_alive():
            loads = client.loads()
            running = max(running, int(loads.running))
            queued = max(queued, int(loads.waiting))
            load.join(0.1)
    return running, queued


def test_sglang_restart_verifies_max_running_requests_and_rolls_back_a_refused_kv_dtype(
    sglang_model_dir: Path, replica_log_dir: Path, tmp_path: Path, no_strays: None
) -> None:
    toml = managed_sglang_settings(sglang_model_dir, replica_log_dir / "restart-sglang.log")
    spec = launch_spec_from_settings(settings_from_mapping(toml, "test"), state_folder=tmp_path)
    # the engine comes from the command: `python -m sglang.launch_server`
    assert spec.dials == Dials("auto", engine="sglang")
    replica = ManagedReplica(spec)
    replica.start(Dials("auto", 4, engine="sglang"))
    try:
        result = _restart(replica, Dials("auto", 2, engine="sglang"))
        assert result.outcome == "applied", "\n".join(result.lines())
        verification = result.verification
        assert verification is not None
        by_name = {check.name: check for check in verification.checks}
        said = {name: (c.source, c.reported, c.ok) for name, c in by_name.items()}
        assert said["kv_cache_dtype"] == ("/get_server_info", "auto", True)
        assert said["max_num_seqs"] == ("/get_server_info", "2", True)
        assert said["max_num_batched_tokens"][1:] == ("default", True)
        assert verification.kv_tokens == 4096  # --max-total-tokens 4096
        assert verification.served_models == ("tiny-llama",) and verification.generated
        running, queued = _most_running_and_queued(replica.url, 8)
        assert running == 2, (running, queued)  # never more than the new cap
        assert queued > 0, (running, queued)  # and the cap is what held the rest back

        refused = _restart(replica, Dials("fp8_e5m2", 2, engine="sglang"))
        assert refused.outcome == "rolled_back", "\n".join(refused.lines())
        assert SGLANG_FP8_REASON in (refused.failure or ""), refused.failure
        assert FP8_REFUSED in refused.failure_log_tail
        assert replica.running and replica.dials == Dials("auto", 2, engine="sglang")
        assert refused.verification is not None and refused.verification.ok
    finally:
        replica.stop()
