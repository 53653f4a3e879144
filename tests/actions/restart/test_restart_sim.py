"""Restarts of the simulated replica, end to end: fp8 doubles the blocks; bad starts roll back."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import RestartResult, apply_restart, plan_restart
from slotop.actions.restart.compare import Change
from slotop.actions.restart.live import LiveBeforeAfter
from slotop.actions.restart.verify import replica_verifier
from slotop.collectors.oneshot import snapshot_of_replica
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot, kv_cache_state
from slotop.config import ReplicaSettings, RestartSettings, Settings
from tests.support.paths import STUB_REPLICA
from tests.support.replica_procs import live_descendants
from tests.support.vllm_replica import free_port

pytestmark = pytest.mark.slow


def _replica(tmp_path: Path, *stub_args: str, health_timeout_s: float = 30.0) -> ManagedReplica:
    port = free_port()
    spec = LaunchSpec(
        url=f"http://127.0.0.1:{port}",
        command=(
            sys.executable,
            str(STUB_REPLICA),
            *stub_args,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ),
        log_path=tmp_path / "replica.log",
        state_path=tmp_path / "state.json",
        health_timeout_s=health_timeout_s,
        stop_grace_s=2.0,
        drain_timeout_s=10.0,
    )
    return ManagedReplica(spec)


def _num_gpu_blocks(url: str) -> tuple[str | None, int | None]:
    with ReplicaClient(url) as client:
        reading = read_metrics_text(client.metrics_text())
    config = reading.cache_configs[0]
    return config.cache_dtype, config.num_gpu_blocks


def _restart(replica: ManagedReplica, after: Dials, probe: Probe | None = None) -> RestartResult:
    before = replica.dials
    assert before is not None
    with ReplicaClient(replica.url) as client:
        kv = kv_cache_state(read_metrics_text(client.metrics_text()))
    plan = plan_restart(
        before,
        after,
        url=replica.url,
        how="managed",
        kv=kv,
        last_downtime_s=replica.last_downtime_s,
        probe_status=probe.status() if probe is not None else None,
        drain_timeout_s=replica.spec.drain_timeout_s,
        health_timeout_s=replica.spec.health_timeout_s,
    )
    return apply_restart(plan, replica, replica_verifier(replica.url, api_key=None), probe=probe)


def test_auto_to_fp8_doubles_the_blocks_with_the_probe_paused_and_resumed(
    tmp_path: Path, no_strays: None
) -> None:
    replica = _replica(tmp_path)
    replica.start(Dials("auto", 64))
    old_pid = replica.pid
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 64, 0),
        output_lengths=LengthDistribution("fixed", 16, 0),
        max_concurrency=4,
    )
    probe = Probe.start(ProbeTarget(base_url=replica.url), shape, concurrency=2)
    try:
        assert probe.wait_for_batch(30.0)
        dtype, blocks = _num_gpu_blocks(replica.url)
        assert dtype == "auto" and blocks is not None
        result = _restart(replica, Dials("fp8", 64), probe)
        assert result.outcome == "applied", "\n".join(result.lines())
        assert _num_gpu_blocks(replica.url) == ("fp8", 2 * blocks)
        assert result.plan.capacity is not None
        assert result.plan.capacity.blocks_after == 2 * blocks
        assert replica.pid != old_pid and replica.dials == Dials("fp8", 64)
        assert old_pid is not None and live_descendants(old_pid) == []
        phases = [event.phase for event in result.events]
        assert phases[:3] == ["plan", "pause_probe", "drain"]
        assert phases[-2:] == ["up", "resume_probe"]
        assert result.downtime_s is not None and replica.last_downtime_s == result.downtime_s
        assert result.verification is not None
        assert result.verification.checks[0].source == "vllm:cache_config_info"
        by_name = {check.name: check for check in result.verification.checks}
        assert by_name["max_num_seqs"].reported == "64"
        assert by_name["max_num_seqs"].ok is True
        probe.drain_records()
        assert probe.wait_for_batch(30.0)
        status = probe.status()
        assert status is not None and status.target_concurrency == 2
        assert _restart(replica, Dials("fp8", 32)).plan.expected_downtime_s == result.downtime_s
    finally:
        probe.stop()
        replica.stop()


def test_a_dtype_the_replica_rejects_rolls_back_and_leaves_it_healthy(
    tmp_path: Path, no_strays: None
) -> None:
    replica = _replica(tmp_path)
    replica.start(Dials("auto"))
    try:
        result = _restart(replica, Dials("fp4"))
        assert result.outcome == "rolled_back"
        assert "exit code 2" in (result.failure or "")
        assert "invalid choice: 'fp4'" in result.failure_log_tail
        assert replica.running and replica.dials == Dials("auto")
        with ReplicaClient(replica.url) as client:
            assert client.health().healthy
        assert _num_gpu_blocks(replica.url)[0] == "auto"
        assert [e.phase for e in result.events if e.phase.startswith("rollback")] == [
            "rollback_stop",
            "rollback_start",
            "rollback_health",
            "rollback_verify",
        ]
    finally:
        replica.stop()


def test_a_replica_that_hangs_on_start_is_killed_after_the_timeout_and_rolled_back(
    tmp_path: Path, no_strays: None
) -> None:
    replica = _replica(tmp_path, "--hang-on", "fp8", "--ignore-sigterm", health_timeout_s=8.0)
    replica.start(Dials("auto"))
    try:
        result = _restart(replica, Dials("fp8"))
        assert result.outcome == "rolled_back"
        assert "did not answer /health within 8 s" in (result.failure or "")
        assert "hanging on --kv-cache-dtype=fp8" in result.failure_log_tail
        assert replica.running and replica.dials == Dials("auto")
        assert _num_gpu_blocks(replica.url)[0] == "auto"
        pid = replica.pid
        assert pid is not None
        assert live_descendants(pid) == [pid]  # the hung stub and its child are gone
    finally:
        replica.stop()


def test_the_live_before_after_of_a_real_restart_under_load(
    tmp_path: Path, no_strays: None
) -> None:
    """The dashboard's before/after, fed as the feed feeds it from a real probe: it measures the
    new dials' requests until it has enough, then the fp8 cache's blocks are double, exactly."""
    replica = _replica(tmp_path)
    replica.start(Dials("auto", 64))
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 64, 0),
        output_lengths=LengthDistribution("fixed", 16, 0),
        max_concurrency=4,
    )
    settings = Settings(
        replica=ReplicaSettings(url=replica.url), restart=RestartSettings(min_requests=20)
    )
    live = LiveBeforeAfter(settings)
    probe = Probe.start(ProbeTarget(base_url=replica.url), shape, concurrency=2)
    seen, taken = [0], [0]

    def take() -> None:
        events, records = probe.events(), probe.drain_records()
        live.add(records, events[seen[0] :], probe.status())
        seen[0], taken[0] = len(events), taken[0] + len(records)

    def snapshot() -> Snapshot:
        with ReplicaClient(replica.url) as client:
            return snapshot_of_replica(client, interval_s=0.5, long_window_s=10, short_window_s=10)

    try:
        deadline = time.monotonic() + 60
        while taken[0] < 30:  # enough under the old dials
            assert time.monotonic() < deadline, "the probe sent too little"
            probe.wait_for_batch(5.0)
            take()
        before = snapshot()
        take()
        with ReplicaClient(replica.url) as client:
            kv = kv_cache_state(read_metrics_text(client.metrics_text()))
        plan = plan_restart(
            Dials("auto", 64),
            Dials("fp8", 64),
            url=replica.url,
            how="managed",
            kv=kv,
            last_downtime_s=None,
            probe_status=probe.status(),
            drain_timeout_s=10.0,
            health_timeout_s=30.0,
        )
        live.began(plan, time.time(), before)
        result = apply_restart(
            plan, replica, replica_verifier(replica.url, api_key=None), probe=probe
        )
        assert result.applied, "\n".join(result.lines())
        live.ended(result)
        state = live.state(None)
        counts = []
        while state is None or state.comparison is None:
            assert time.monotonic() < deadline + 60, f"never enough: {state}"
            probe.wait_for_batch(5.0)
            take()
            state = live.state(snapshot())
            assert state is not None
            counts.append(state.requests)
            job = live.build()  # the dashboard runs it on a worker
            if job is not None:
                live.built(job())
                state = live.state(None)
        assert counts == sorted(counts) and max(counts) == 20  # "n of 20 requests" as they end
        comparison = state.comparison
        assert comparison.before.stats is not None and comparison.after.stats is not None
        # each side: at least its 20 requests, cut into batches of two request lifetimes or more
        for side in (comparison.before, comparison.after):
            stats, spread = side.stats, side.spread
            assert stats is not None and spread is not None and stats.requests_ok >= 20
            assert spread.batches is not None and spread.batches >= 3
        blocks = comparison.row("kv_blocks_total")
        assert blocks is not None and blocks.ratio == 2.0 and blocks.verdict is Change.BETTER
        ttft = comparison.row("ttft_p50_s")
        assert ttft is not None and ttft.noise.half_width is not None
        assert ttft.verdict in (Change.BETTER, Change.WORSE, Change.WITHIN_NOISE)
        tail = comparison.row("ttft_p99_s")  # some 25 requests a side: a p99 is not judged
        assert tail is not None and tail.verdict is Change.NOISE_UNKNOWN
    finally:
        probe.stop()
        replica.stop()
