"""A sweep on the simulated replica carries its modelled GPU from idle to busy, up to the knee."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.decide import StopReason, StopRules, SweepSlo, all_step_flags
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import MonitorWatch, SweepRunner
from slotop.actions.sweep.step import Gauges, measure_step
from slotop.collectors.gpu.reader import GpuDevice, GpuSnapshot
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from tests.support.sim_replica import run_sim
from tests.support.tui_fakes import capture_snapshot


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
    spec = SweepSpec(plan=(1,), slo=SweepSlo(ttft_s=1.0, itl_s=0.1))
    step = measure_step(1, [], 0.0, 10.0, spec, gauges_sim_gpu_util=gauges.sim_gpu_util)
    assert step.sim_gpu_util_mean_ratio == pytest.approx((0.4 + 0.8 + 1.0) / 3)
    assert step.sim_gpu_util_max_ratio == 1.0
    bare = measure_step(1, [], 0.0, 10.0, spec)
    assert bare.sim_gpu_util_mean_ratio is None and bare.sim_gpu_util_max_ratio is None


# Llama-3.1-8B on an A100 40GB with 2,048-token prompts and 16 output tokens: prefill compute
# (2,048 × 14 GFLOP at 65% of 312 TFLOPS, ~0.14 s a prompt) fills the GPU by about 4 requests in
# flight, so throughput stops rising between 4 and 8. The token budget (16,384) admits 8 prompts
# at once, so nothing waits for the budget; the queue rule is left out because the sim's waiting
# gauge counts requests that arrived during a step, which vLLM would not count until the next one.
SHAPE = LoadShape(
    prompt_lengths=LengthDistribution("fixed", 2048),
    output_lengths=LengthDistribution("fixed", 16),
    max_concurrency=16,
)
SPEC = SweepSpec(
    plan=(1, 2, 4, 8, 16),
    slo=SweepSlo(ttft_s=20.0, itl_s=2.0),  # far out of reach: this sweep ends at the knee
    rules=StopRules(queue_waiting_requests=1e9),
    warmup_s=1.0,
    dwell_s=3.0,
    min_requests=4,
    max_dwell_s=12.0,
    tick_s=0.5,
)


@pytest.fixture(scope="module")
def compute_bound_sim() -> Iterator[str]:
    yield from run_sim(
        "--gpu",
        "a100-40gb",
        "--max-num-batched-tokens",
        "16384",
        "--max-model-len",
        "4096",
        model="llama-3.1-8b",
    )


@pytest.mark.slow
def test_the_sweep_finds_the_knee_with_the_simulated_gpu_busier_on_the_way(
    compute_bound_sim: str,
) -> None:
    control = ProbeControl(ProbeTarget(compute_bound_sim), SHAPE, allow_remote_load=False)
    with ReplicaClient(compute_bound_sim) as client:
        monitor = ReplicaMonitor(client, long_window_s=30.0, interval_s=SPEC.tick_s)
        result = SweepRunner(control, MonitorWatch(monitor), SPEC).run()
    assert result.stop is StopReason.KNEE
    # Throughput stops rising between 4 and 8 (see SHAPE); on a machine busy with other work the
    # simulator's steps run late, the step at 4 reads low, and the gain to 8 can pass 10%: then
    # the knee shows one step later, at 16.
    concurrencies = [s.concurrency for s in result.steps]
    assert concurrencies in ([1, 2, 4, 8], [1, 2, 4, 8, 16])
    assert result.recommendation.concurrency == concurrencies[-2]
    flags = all_step_flags(result.steps, SPEC.slo, SPEC.rules)
    assert all(f == () for f in flags[:-1]) and StopReason.KNEE in flags[-1]
    utils = [s.sim_gpu_util_mean_ratio for s in result.steps]
    assert all(u is not None for u in utils), utils
    first, knee = utils[0], utils[-1]
    assert first is not None and knee is not None
    # One request at a time leaves the GPU idle between a request's end and the next's arrival;
    # past it, steps run back to back: busier than the GPU litmus's 80%, and busier than at first.
    assert first < knee and knee > 0.8
    first_ttft, knee_ttft = result.steps[0].ttft_p99_s, result.steps[-1].ttft_p99_s
    assert first_ttft is not None and knee_ttft is not None
    assert knee_ttft > 2 * first_ttft  # p99 bends on the way to the knee
