"""The step-time model: it reproduces its calibration points and bends the way rooflines bend."""

from __future__ import annotations

import pytest

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.timing import CALIBRATION_POINTS, CalibrationPoint, StepTimeModel


def model_for(
    model: str = "llama-3.1-8b", gpu: str = "h100-sxm", tp: int = 1, dtype: str = "auto"
) -> StepTimeModel:
    config = resolve_engine_config(
        MODELS[model], GPUS[gpu], tensor_parallel_size=tp, kv_cache_dtype=dtype, max_model_len=8192
    )
    return StepTimeModel(config)


@pytest.mark.parametrize(
    "point", CALIBRATION_POINTS, ids=lambda p: f"{p.gpu}-{p.model}-b{p.batch_size}"
)
def test_the_model_reproduces_each_calibration_point(point: CalibrationPoint) -> None:
    timing = model_for(point.model, point.gpu, point.tensor_parallel_size)
    if point.prefill_tokens:
        predicted = timing.prefill_step_s(point.prefill_tokens)
    else:
        predicted = timing.decode_step_s(point.batch_size, point.context_tokens)
    assert predicted == pytest.approx(point.measured_s, rel=point.tolerance_ratio), point.source


def test_every_calibration_point_names_its_source() -> None:
    for point in CALIBRATION_POINTS:
        assert len(point.source) > 20
        assert 0 < point.tolerance_ratio <= 0.25


def test_the_brief_s_sanity_ranges_hold_for_llama_8b_on_h100() -> None:
    timing = model_for()
    assert 6e-3 <= timing.decode_step_s(1, 512) <= 8e-3
    assert 10e-3 <= timing.decode_step_s(64, 512) <= 15e-3
    assert 20e-3 <= timing.prefill_step_s(1024) <= 40e-3


def test_small_batch_decode_is_bandwidth_bound_well_above_the_pure_roofline() -> None:
    pure_roofline_s = 8_030_261_248 * 2 / 3.35e12
    assert model_for().decode_step_s(1, 128) > 1.25 * pure_roofline_s


@pytest.mark.parametrize("context", [128, 2048, 16384])
def test_decode_time_grows_with_batch(context: int) -> None:
    timing = model_for()
    times = [timing.decode_step_s(batch, context) for batch in (1, 8, 32, 128, 512)]
    assert times == sorted(times)
    assert times[-1] > 2 * times[0]


def test_decode_time_grows_with_the_kv_it_reads() -> None:
    timing = model_for()
    times = [timing.decode_step_s(32, context) for context in (256, 2048, 8192, 32768)]
    assert times == sorted(times)
    # 32 × 32k tokens of KV is 137 GB: far more than the 16 GB of weights, so it dominates.
    assert times[-1] > 3 * times[0]


def test_prefill_time_grows_faster_than_linearly_with_long_prompts() -> None:
    timing = model_for()
    short, long = timing.prefill_step_s(2048), timing.prefill_step_s(32768)
    assert long > 16 * short


def test_fp8_kv_speeds_up_long_context_decode_only() -> None:
    bf16, fp8 = model_for(dtype="auto"), model_for(dtype="fp8")
    assert fp8.decode_step_s(64, 8192) < 0.8 * bf16.decode_step_s(64, 8192)
    assert fp8.decode_step_s(1, 16) == pytest.approx(bf16.decode_step_s(1, 16), rel=0.01)


def test_faster_gpus_step_faster() -> None:
    order = ["l4", "l40s", "a100-80gb", "h100-sxm", "h200"]
    decode = [model_for(gpu=gpu).decode_step_s(16, 1024) for gpu in order]
    assert decode == sorted(decode, reverse=True)


def test_tensor_parallel_makes_the_70b_model_decode_at_a_usable_pace() -> None:
    tp4 = model_for("llama-3.1-70b", "h100-sxm", tp=4).decode_step_s(1, 1024)
    tp8 = model_for("llama-3.1-70b", "h100-sxm", tp=8).decode_step_s(1, 1024)
    assert 8e-3 < tp8 < tp4 < 25e-3
    # Each layer's two all-reduces keep eight GPUs from halving four GPUs' step.
    assert tp4 / tp8 < 2


def test_a_mixed_step_costs_at_least_each_of_its_halves() -> None:
    timing = model_for()
    decode_only = timing.step_time_s(64, 64, 64 * 1025, 0, 0, 0)
    prefill_only = timing.step_time_s(1, 0, 0, 4096, 4096, 4096 * 4097 // 2)
    mixed = timing.step_time_s(65, 64, 64 * 1025, 4096, 4096, 4096 * 4097 // 2)
    assert mixed >= max(decode_only, prefill_only)
    assert mixed < decode_only + prefill_only


def test_an_empty_step_takes_no_time() -> None:
    assert model_for().step_time_s(0, 0, 0, 0, 0, 0) == 0.0
