"""Restarts of a real vLLM CPU replica through slotop's own [launch] machinery, verified end to end.

Each start of the tiny dummy-weight Llama takes some 20-30 s on two cores (30 CPU-seconds), so
one test takes one managed replica through every case: six starts on any host, one or two of
them refused and rolled back.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import RestartResult, apply_restart, plan_restart
from slotop.actions.restart.verify import replica_verifier
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import kv_cache_state
from tests.support.replica_procs import live_descendants
from tests.support.vllm_replica import (
    FP8_REFUSED,
    managed_spec,
    prompt_token_ids,
    stream_completion,
    vllm_accepts_fp8_kv,
)

pytestmark = pytest.mark.vllm

CPU_ACCEPTED: tuple[tuple[str, int], ...] = (
    ("bfloat16", 2),
    ("fp8_e5m2", 4),
)
"""One KV dtype of each width vLLM 0.32 CPU starts with besides auto and fp8, and the blocks it
gives over fp32's (fp8 only on a CPU with AVX-512 or AMX: `vllm_accepts_fp8_kv`). float16,
fp8_e4m3 and fp8_inc take the same path through slotop (the name passed and read back, the
blocks from the width); each start costs 25-30 s on two cores, so they are left to this pair."""


def _spec(model_dir: Path, log_dir: Path, state_dir: Path) -> LaunchSpec:
    """A [launch] for the tiny replica: the test helper's command without slotop's dial flags."""
    return managed_spec(model_dir, log_dir / "restart-vllm.log", state_dir / "managed.json")


def _restart(replica: ManagedReplica, after: Dials) -> RestartResult:
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
        probe_status=None,
        drain_timeout_s=5.0,
        health_timeout_s=replica.spec.health_timeout_s,
        model_dtype="float32",
    )
    result = apply_restart(plan, replica, replica_verifier(replica.url, api_key=None))
    print("\n".join(result.lines()))
    return result


def _blocks(url: str) -> tuple[str | None, int | None]:
    with ReplicaClient(url) as client:
        config = read_metrics_text(client.metrics_text()).cache_configs[0]
    return config.cache_dtype, config.num_gpu_blocks


def _refused_fp8_and_rolled_back(result: RestartResult) -> None:
    """vLLM's own refusal of an fp8 KV cache (a CPU without AVX-512 or AMX), then the way back."""
    assert result.outcome == "rolled_back", "\n".join(result.lines())
    assert FP8_REFUSED in (result.failure or "")


@pytest.mark.slow
def test_restarts_change_max_num_seqs_and_each_kv_dtype_and_a_refused_dtype_rolls_back(
    tiny_model_dir: Path, replica_log_dir: Path, tmp_path: Path, no_strays: None
) -> None:
    """One managed replica (six starts, one or two refused): auto; fp8 with max_num_seqs 4 (or
    vLLM's own refusal of fp8 and the way back, on a CPU without AVX-512 or AMX); a dtype vLLM
    does not know, rolled back; then each other width vLLM CPU starts with on this host."""
    replica = ManagedReplica(_spec(tiny_model_dir, replica_log_dir, tmp_path))
    replica.start(Dials("auto"))
    try:
        dtype, blocks = _blocks(replica.url)
        # 64 MiB of float32 K and V over 2 layers × 2 heads × 64 dims, 128-token CPU blocks
        assert (dtype, blocks) == ("auto", 64 * 2**20 // (2 * 2 * 2 * 64 * 4) // 128)
        first = replica.pid
        fp8 = vllm_accepts_fp8_kv()
        result = _restart(replica, Dials("fp8", 4))
        if fp8:
            assert result.outcome == "applied", "\n".join(result.lines())
            verification = result.verification
            assert verification is not None
            by_name = {check.name: check for check in verification.checks}
            assert (by_name["kv_cache_dtype"].source, by_name["kv_cache_dtype"].ok) == (
                "vllm:cache_config_info",
                True,
            )
            assert (by_name["max_num_seqs"].source, by_name["max_num_seqs"].reported) == (
                "start-up log",
                "4",
            )
            assert verification.served_models == ("tiny-llama",)
            assert result.plan.capacity is not None
            assert result.plan.capacity.blocks_after == 4 * blocks
            assert first is not None and live_descendants(first) == []
            # the same 64 MiB of KV memory: float32 (4 B) → fp8 (1 B) is four times the blocks
            now, now_blocks = Dials("fp8", 4), ("fp8", 4 * blocks)
        else:
            _refused_fp8_and_rolled_back(result)
            now, now_blocks = Dials("auto"), ("auto", blocks)
        assert replica.running and replica.dials == now
        assert _blocks(replica.url) == now_blocks

        refused = _restart(replica, Dials("fp4", 4))
        assert refused.outcome == "rolled_back"
        assert "argument --kv-cache-dtype: invalid choice: 'fp4'" in refused.failure_log_tail
        assert replica.running and replica.dials == now
        assert _blocks(replica.url) == now_blocks
        assert refused.verification is not None and refused.verification.ok

        for kv_dtype, ratio in CPU_ACCEPTED:
            if kv_dtype.startswith("fp8") and not fp8:
                # vLLM refuses every quantized KV dtype with the one check already seen above
                # (`is_quantized_kv_cache` in its CPU attention backend): the same refusal and
                # rollback again would cost two starts (some 70 CPU-seconds) and show nothing new
                continue
            result = _restart(replica, Dials(kv_dtype))
            assert result.outcome == "applied", "\n".join(result.lines())
            assert _blocks(replica.url) == (kv_dtype, ratio * blocks)
            with httpx.Client(timeout=60.0) as client:  # and it serves with that cache
                record = stream_completion(client, replica.url, prompt_token_ids(1, 16), 8)
            assert (record.error, record.completion_tokens) == (None, 8)
    finally:
        replica.stop()
