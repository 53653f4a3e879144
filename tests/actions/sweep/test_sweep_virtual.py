"""Sweeps decided on the simulated engine in virtual time: the real runner, stop rules and
recommendation, the probe's own load rules, and minutes of load in a fraction of a second.

Expected values come from the issue that asked for them (the small L4 sweep) and from the
engine's own numbers where they are read back, never from the decisions under test.
"""

from __future__ import annotations

import pytest

from slotop.actions.sweep.decide import StopReason, all_step_flags
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.table import format_sweep_text
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.slo import Slo
from tests.support.virtual_load import engine_config, fixed_shape
from tests.support.virtual_sweep import virtual_sweep


def test_the_small_l4_sweep_ends_with_a_recommendation_and_says_how_sure() -> None:
    # `slotop sim --gpu l4 --model llama-3.1-8b --max-num-seqs 16 --max-model-len 4096`, swept
    # with `--ttft-ms 2000 --itl-ms 80 --concurrency 1,4,16,64 --dwell-s 8`: a flat count of 50
    # requests once left concurrency 4 "under-sampled" (49 of 50) and the sweep without a pick.
    config = engine_config(gpu="l4", max_num_seqs=16, max_model_len=4096)
    spec = SweepSpec(plan=(1, 4, 16, 64), slo=Slo(ttft_s=2.0, itl_s=0.08), dwell_s=8.0)
    result = virtual_sweep(config, fixed_shape(), spec)
    assert result.finished and result.recommendation.concurrency is not None
    flags = all_step_flags(result.steps, spec.slo, spec.rules)
    assert all(StopReason.UNDECIDED not in step_flags for step_flags in flags)
    text = format_sweep_text(result)
    assert f"Operating point: concurrency {result.recommendation.concurrency}." in text
    assert "How sure: concurrency" in text and "95% interval" in text


def test_a_step_dwells_on_while_a_target_straddles_its_interval() -> None:
    config = engine_config()  # Llama-3.1-8B on an H100: five streams' TTFT p90 near 24.8 ms
    clear = SweepSpec(
        plan=(5,),
        slo=Slo(ttft_s=0.2, itl_s=0.05, ttft_percentile=90.0, itl_percentile=90.0),
        dwell_s=10.0,
        max_dwell_s=40.0,
    )
    decided = virtual_sweep(config, fixed_shape(), clear).steps[0]
    assert decided.measured_s == 10.0  # decided at the first look past its dwell
    low, high = decided.client.ttft_slo_low_s, decided.client.ttft_slo_high_s
    assert low is not None and high is not None and low < high < 0.2
    straddled = SweepSpec(
        plan=(5,),
        slo=Slo(ttft_s=(low + high) / 2, itl_s=0.05, ttft_percentile=90.0, itl_percentile=90.0),
        dwell_s=10.0,
        max_dwell_s=40.0,
    )
    longer = virtual_sweep(config, fixed_shape(), straddled).steps[0]
    assert longer.measured_s > 10.0 and longer.client.requests_ok > decided.client.requests_ok


def test_a_step_of_dwell_long_requests_counts_the_tokens_the_replicas_counter_counts() -> None:
    # Two streams of 385 tokens on the H100 (about 2.6 s each, near the 3 s dwell), both sent at
    # the step's start: counting only the requests sent and ended inside the dwell finds the two
    # that end at 2.6 s (2 x 385 tokens in 3 s, 257 tok/s) against the engine's ~300. The step
    # counts the tokens that came out inside the dwell, whichever request carried them, so it
    # reads what the replica's own generation-token counter reads over the same span.
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 64),
        output_lengths=LengthDistribution("fixed", 385),
        max_concurrency=8,
    )
    spec = SweepSpec(
        plan=(2,),
        slo=Slo(ttft_s=2.0, itl_s=0.2),
        warmup_s=1.0,
        dwell_s=3.0,
        min_requests=1,
        max_dwell_s=3.0,
        tick_s=0.25,
    )
    for seed in range(5):
        (step,) = virtual_sweep(engine_config(), shape, spec, seed=seed).steps
        assert step.client.tpot_p50_s is not None
        assert 1.5 < step.client.tpot_p50_s * 385 < 6.0, "the requests must last about the dwell"
        server = step.server.output_tokens_per_s
        assert server is not None and server > 280
        assert step.client.output_tokens_per_s == pytest.approx(server, rel=0.01), seed
        assert step.requests_cut == 0
        assert step.client.requests_ok >= 1 and step.client.requests_failed == 0
