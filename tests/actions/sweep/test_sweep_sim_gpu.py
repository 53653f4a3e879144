"""A sweep on the simulated replica carries its modelled GPU from idle to busy, and one in
virtual time finds the knee where the compute-bound GPU stops giving throughput."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.decide import StopReason, StopRules, all_step_flags
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import MonitorWatch, SweepRunner
from slotop.actions.sweep.step import Gauges, measure_step
from slotop.collectors.gpu.reader import GpuDevice, GpuSnapshot
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from slotop.slo import Slo
from tests.support.sim_replica import run_sim
from tests.support.tui_fakes import capture_snapshot
from tests.support.virtual_load import engine_config
from tests.support.virtual_sweep import virtual_sweep


def _simulated(*utils: int) -> GpuSnapshot:
    return GpuSnapshot(
        0.0,
        tuple(
            GpuDevice(i, None, "sim", u, None, None, None, None, None, None, None, None, None)
            for i, u in enumerate(utils)
        ),
    )


def test_each_scrape_records_the_least_busy_simulated_gpu_and_the_step_sums_them_up() -> None:
    real = capture_snapshot()
    gauges = Gauges()
    gauges.add(real)  # a real replica's /metrics has no GPU: nothing recorded
    for utils in ((40, 60), (90, 80), (100, 100)):
        gauges.add(dataclasses.replace(real, simulated_gpu=_simulated(*utils)))
    assert gauges.sim_gpu_util == [0.4, 0.8, 1.0]
    spec = SweepSpec(plan=(1,), slo=Slo(ttft_s=1.0, itl_s=0.1))
    step = measure_step(1, [], 0.0, 10.0, spec, gauges_sim_gpu_util=gauges.sim_gpu_util)
    assert step.server.sim_gpu_util_mean_ratio == pytest.approx((0.4 + 0.8 + 1.0) / 3)
    assert step.server.sim_gpu_util_max_ratio == 1.0
    bare = measure_step(1, [], 0.0, 10.0, spec)
    assert (
        bare.server.sim_gpu_util_mean_ratio is None and bare.server.sim_gpu_util_max_ratio is None
    )


# Llama-3.1-8B on an A100 40GB with 2,048-token prompts and 16 output tokens: prefill compute
# (2,048 × 14 GFLOP at 65% of 312 TFLOPS, ~0.14 s a prompt) fills the GPU by a few requests in
# flight, so throughput flattens on the way to 16. The token budget (16,384) admits 8 prompts at
# once; the queue rule is left out, this sweep ends at the knee.
SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", 2048),
    output_lengths=LengthDistribution("fixed", 16),
    max_concurrency=32,
)
SLO = Slo(ttft_s=20.0, itl_s=2.0)  # far out of reach
RULES = StopRules(queue_waiting_requests=1e9)
FLAGS = ("--gpu", "a100-40gb", "--max-num-batched-tokens", "16384", "--max-model-len", "4096")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_sweep_finds_where_the_compute_bound_gpu_stops_giving_throughput(seed: int) -> None:
    # In virtual time, so the decision is the engine's and not a busy machine's: steps long
    # enough (40 requests, 30 s at the least) that a step's throughput is read within a few per
    # cent. Output tokens/s gain some 40, 28 and 16% to 8 in flight, then 5-8% to 16: the knee.
    spec = SweepSpec(
        plan=(1, 2, 4, 8, 16, 32),
        slo=SLO,
        rules=RULES,
        warmup_s=1.0,
        dwell_s=30.0,
        min_requests=40,
        max_dwell_s=60.0,
        tick_s=0.5,
    )
    config = engine_config(gpu="a100-40gb", max_num_batched_tokens=16384, max_model_len=4096)
    result = virtual_sweep(config, SHAPE, spec, seed=seed)
    assert result.stop is StopReason.KNEE
    assert [s.concurrency for s in result.steps] == [1, 2, 4, 8, 16]
    assert result.recommendation.concurrency == 8
    flags = all_step_flags(result.steps, spec.slo, spec.rules)
    assert all(f == () for f in flags[:-1]) and StopReason.KNEE in flags[-1]


@pytest.fixture(scope="module")
def compute_bound_sim() -> Iterator[str]:
    yield from run_sim(*FLAGS, model="llama-3.1-8b")


@pytest.mark.slow
def test_a_sweep_on_the_simulated_replica_carries_its_gpu_from_idle_to_busy(
    compute_bound_sim: str,
) -> None:
    # The real runner, probe and /metrics in real time: what each step reads of the simulated
    # GPU. Where the knee falls is the virtual test's to say; two steps, no decision asked of them.
    spec = SweepSpec(
        plan=(1, 16),
        slo=SLO,
        rules=RULES,
        warmup_s=1.0,
        dwell_s=3.0,
        min_requests=4,
        max_dwell_s=12.0,
        tick_s=0.5,
    )
    control = ProbeControl(ProbeTarget(compute_bound_sim), SHAPE, allow_remote_load=False)
    with ReplicaClient(compute_bound_sim) as client:
        monitor = ReplicaMonitor(client, long_window_s=30.0, interval_s=spec.tick_s)
        result = SweepRunner(control, MonitorWatch(monitor), spec).run()
    assert [s.concurrency for s in result.steps] == [1, 16]
    utils = [s.server.sim_gpu_util_mean_ratio for s in result.steps]
    assert all(u is not None for u in utils), utils
    first, busy = utils
    assert first is not None and busy is not None
    # One request at a time leaves the GPU idle between a request's end and the next's arrival;
    # at 16, steps run back to back: busier than the GPU litmus's 80%, and busier than at first.
    assert first < busy and busy > 0.8
    first_ttft, busy_ttft = result.steps[0].client.ttft_p99_s, result.steps[-1].client.ttft_p99_s
    assert first_ttft is not None and busy_ttft is not None
    assert busy_ttft > 2 * first_ttft  # sixteen 2,048-token prefills wait on one another
