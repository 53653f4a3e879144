"""Restarts that change nothing, twenty of them, through the dashboard's own before/after on the
simulated engine in virtual time; and changes with a known effect, which it must still see.

A 95% band promises at most one run in twenty beyond noise on a row when nothing changed; these
runs are seeded, so the counts below are exact for this code and fail the moment a band narrows
(the bootstrap over requests it replaced read ITL p50 beyond noise in most of them).
"""

from __future__ import annotations

from collections import Counter

import pytest

from slotop.actions.restart.compare import Change
from slotop.sim.types import EngineConfig
from tests.support.virtual_before_after import dashboard_before_after, no_op
from tests.support.virtual_load import engine_config, fixed_shape, varied_shape

pytestmark = pytest.mark.slow

ROWS = (
    "ttft_p50_s",
    "itl_p50_s",
    "itl_p99_s",
    "output_tokens_per_s",
    "request_rate_rps",
    "goodput_rps",
    "goodput_ratio",
)
RATES = ("output_tokens_per_s", "request_rate_rps", "goodput_rps")


@pytest.mark.parametrize(("shape", "concurrency"), [(fixed_shape(), 5), (varied_shape(), 8)])
def test_twenty_no_op_restarts_read_beyond_noise_as_a_95_percent_band_allows(
    shape: object, concurrency: int
) -> None:
    config = engine_config()
    beyond: Counter[str] = Counter()
    for seed in range(20):
        comparison = dashboard_before_after(config, no_op(config), shape, concurrency, seed=seed)  # type: ignore[arg-type]
        assert comparison is not None
        for row in comparison.rows:
            if row.key in RATES:  # a measured rate never has a noise of ±0.00
                assert row.noise.half_width is not None and row.noise.half_width > 0, row
            if row.key in ROWS and row.verdict in (Change.BETTER, Change.WORSE):
                beyond[row.key] += 1
    # at most 2 of 20 per row (10%: the count a 5% chance reaches one time in four)
    assert all(count <= 2 for count in beyond.values()), beyond


def test_more_seats_at_sixteen_in_flight_are_seen_every_time() -> None:
    # max_num_seqs 4 → 16 at 16 in flight: twelve requests stop queueing for a seat
    four, sixteen = engine_config(max_num_seqs=4), engine_config(max_num_seqs=16)
    called = 0
    for seed in range(10):
        comparison = dashboard_before_after(four, sixteen, fixed_shape(), 16, seed=seed)
        assert comparison is not None
        ttft, rate = comparison.row("ttft_p50_s"), comparison.row("request_rate_rps")
        assert ttft is not None and rate is not None
        assert Change.WORSE not in (ttft.verdict, rate.verdict)
        called += ttft.verdict is Change.BETTER
    assert called >= 9


def test_fp8_where_the_kv_cache_binds_is_seen_nine_times_in_ten() -> None:
    # 1024/512 at 6 in flight in 288 blocks at 16 bits: the six do not fit, and preempt; fp8's
    # 577 blocks hold them all, so preemptions stop and more tokens come out a second
    def config(dtype: str) -> EngineConfig:
        return engine_config(
            kv_cache_dtype=dtype, max_num_seqs=64, gpu_memory_utilization=0.217, max_model_len=2048
        )

    called = 0
    for seed in range(10):
        comparison = dashboard_before_after(
            config("auto"), config("fp8"), fixed_shape(1024, 512), 6, seed=seed
        )
        assert comparison is not None
        preemptions = comparison.row("preemptions")
        tokens = comparison.row("output_tokens_per_s")
        assert preemptions is not None and tokens is not None
        assert Change.WORSE not in (preemptions.verdict, tokens.verdict)
        called += Change.BETTER in (preemptions.verdict, tokens.verdict)
    assert called >= 9
