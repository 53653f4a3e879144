"""A sweep step whose requests last about as long as its dwell, against the simulated replica.

Both slots send at the step's start (t = 0) and every E ≈ 2.6 s after; the warm-up is 1 s and the
dwell 3 s. Counting the requests sent after the step began and ended in the dwell (the old way)
finds the two that end at 2.6 s, 2 × 385 tokens in 3 s: 257 tok/s against the loop's ~300 (−15%,
measured 256 vs 300 on this replica). The replica's own generation-token counter over the same
span is the independent reference.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotop.actions.probe_control import ProbeControl
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import MonitorWatch, SweepRunner
from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from slotop.slo import Slo
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

OUTPUT_TOKENS = 385
"""About 2.6 s of decode for Llama-3.1-8B on the simulated H100 (~6.7 ms a token): near the dwell."""
DWELL_S = 3.0
TICK_S = 0.25


@pytest.fixture(scope="module")
def h100_sim() -> Iterator[str]:
    """The simulated H100 serving Llama-3.1-8B, every request running to its max_tokens."""
    yield from run_sim("--output-len-distribution", "never", model="llama-3.1-8b")


def test_a_step_of_dwell_long_requests_matches_the_replicas_token_counter(h100_sim: str) -> None:
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 64),
        output_lengths=LengthDistribution("fixed", OUTPUT_TOKENS),
        max_concurrency=8,
    )
    spec = SweepSpec(
        plan=(2,),
        slo=Slo(ttft_s=2.0, itl_s=0.2),
        warmup_s=1.0,
        dwell_s=DWELL_S,
        min_requests=1,
        max_dwell_s=DWELL_S,
        tick_s=TICK_S,
    )
    control = ProbeControl(ProbeTarget(h100_sim), shape, allow_remote_load=False)
    with ReplicaClient(h100_sim) as client:
        monitor = ReplicaMonitor(client, long_window_s=30.0, interval_s=TICK_S)
        (step,) = SweepRunner(control, MonitorWatch(monitor), spec).run().steps
    assert step.client.tpot_p50_s is not None
    request_s = step.client.tpot_p50_s * OUTPUT_TOKENS
    assert DWELL_S / 2 < request_s < DWELL_S * 2, "the requests must last about the dwell"
    server = step.server.output_tokens_per_s
    assert server is not None and server > 0
    assert step.client.output_tokens_per_s == pytest.approx(server, rel=0.05)
    assert step.requests_cut == 0
    assert step.client.requests_ok >= 1 and step.client.requests_failed == 0
