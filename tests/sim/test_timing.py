"""The step-time model: it lands on each published figure it cites, bends the way rooflines bend,
and overlaps the host's CPU with the GPU only under async scheduling."""

from __future__ import annotations

import pytest

from slotop.sim.apiserver import API_SERVER_MEASURED_S, ApiServerTiming, api_server_timing
from slotop.sim.calibration import CALIBRATION_POINTS, CalibrationPoint
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.tables import GPUS, HOSTS, MODELS
from slotop.sim.timing import (
    CPU_REQUEST_S,
    CPU_STEP_S,
    StepTimeModel,
    activation_traffic,
)

_LAMBDA_320_PROMPTS = """
13 25 27 10 329 29 399 328 4 205 16 372 403 9 12 770 227 8 14 390 659 59 76 744
619 279 344 9 10 45 11 4 80 768 317 40 619 8 298 16 17 696 575 11 7 281 12 147
481 770 336 6 331 9 45 222 802 481 93 641 22 15 16 77 32 689 178 9 628 480 42 336
24 515 761 112 113 348 82 467 245 11 24 343 13 387 258 32 28 225 248 35 133 98 27 23
58 363 203 140 140 230 310 521 768 317 298 336 491 19 10 59 48 20 20 54 107 53 72 18
10 768 7 933 239 277 26 35 462 386 25 23 17 20 44 661 631 349 53 71 37 10 21 37
496 8 9 353 10 595 5 49 286 305 56 43 52 310 35 7 7 238 10 143 660 191 72 39
258 312 49 9 15 561 76 561 501 8 66 15 303 19 455 27 143 688 9 31 361 21 117 8
12 775 338 176 349 166 419 401 307 169 647 21 9 34 12 37 45 154 8 10 18 253 486 611
96 19 62 529 15 30 10 445 680 762 441 77 12 276 178 22 159 95 366 4 7 770 8 45
480 90 32 329 768 72 86 53 83 419 44 14 56 28 707 235 27 668 17 427 44 370 8 674
455 185 68 19 132 304 9 34 39 54 768 661 404 240 25 95 60 24 12 85 66 62 462 22
241 25 32 13 175 31 342 43 339 144 233 16 10 11 269 587 8 233 10 48 9 335 22 61
29 692 7 332 512 13 128 24
"""
LAMBDA_320_PROMPT_TOKENS = tuple(int(n) for n in _LAMBDA_320_PROMPTS.split())
"""Prompt lengths of the 320 ShareGPT requests in the Lambda H100 run, in the file's order."""

_LAMBDA_320_OUTPUTS = """
120 613 233 194 101 741 9 3 6 31 392 84 396 45 291 9 173 277 334 37 587 372 36 135
26 45 450 118 226 4 5 146 59 11 567 192 476 130 13 223 188 16 35 276 202 492 239 129
26 79 17 204 11 207 78 340 17 9 123 6 559 5 316 26 417 206 151 42 25 18 159 0
25 267 19 12 768 67 628 11 218 296 382 49 125 0 26 237 350 13 490 408 58 29 512 413
526 16 416 434 451 17 573 0 7 8 11 22 0 249 281 392 611 572 23 256 31 39 300 355
340 9 172 458 147 240 154 768 0 141 42 26 780 334 125 4 4 721 63 24 331 482 110 216
184 99 285 22 355 40 150 46 0 0 574 572 214 0 419 163 162 77 482 170 510 53 16 384
57 9 170 356 173 19 390 339 77 17 520 8 8 198 510 478 304 398 16 475 91 54 509 608
36 425 15 25 12 363 0 0 44 43 267 474 334 31 261 402 346 176 22 22 159 203 8 16
16 216 86 0 234 258 247 23 47 16 447 221 702 0 44 142 740 18 76 299 250 24 300 178
5 373 25 23 76 322 87 389 21 7 527 485 339 394 11 27 254 313 392 111 365 0 79 11
275 22 99 373 38 0 657 283 503 250 16 407 0 7 261 322 322 91 56 365 342 316 25 441
646 241 222 4 27 290 7 21 336 16 360 199 381 297 18 338 301 189 373 478 394 23 230 455
283 0 201 0 20 308 30 295
"""
LAMBDA_320_OUTPUT_TOKENS = tuple(int(n) for n in _LAMBDA_320_OUTPUTS.split())
"""Their output lengths (0 where the server returned nothing; replayed as 1 token)."""


def model_for(
    model: str = "llama-3.1-8b",
    gpu: str = "h100-sxm",
    tp: int = 1,
    dtype: str = "auto",
    async_scheduling: bool = True,
) -> StepTimeModel:
    config = resolve_engine_config(
        MODELS[model],
        GPUS[gpu],
        tensor_parallel_size=tp,
        kv_cache_dtype=dtype,
        max_model_len=8192,
        async_scheduling=async_scheduling,
    )
    return StepTimeModel(config)


def replay_lambda_320() -> float:
    """Simulated seconds for the Lambda run's 320 requests, all reaching the engine at once, to end."""
    config = resolve_engine_config(
        MODELS["llama-3.1-8b"],
        GPUS["h100-sxm"],
        max_model_len=2048,
        max_num_seqs=1024,
        gpu_memory_utilization=0.95,
    )
    engine = Engine(config)
    lengths = zip(LAMBDA_320_PROMPT_TOKENS, LAMBDA_320_OUTPUT_TOKENS, strict=True)
    for index, (prompt, output) in enumerate(lengths):
        engine.submit(f"r{index}", prompt, max(1, output), True, 0.0)
    now = 0.0
    while engine.has_work():
        now = engine.step(now).end_s
    return now


def predict(point: CalibrationPoint) -> float:
    """The model's reading of one calibration point, in seconds."""
    if point.kind == "replay":
        return replay_lambda_320()
    timing = model_for(point.model, point.gpu, point.tensor_parallel_size)
    if point.kind == "ttft":
        api = api_server_timing(HOSTS[GPUS[point.gpu].host])
        prefill_s = timing.prefill_step_s(point.prefill_tokens)
        return api.alone_s("chat", point.prefill_tokens) + prefill_s + api.response_s
    if point.kind == "decode-gpu":
        return timing.decode_price(point.batch_size, point.context_tokens).gpu_s
    return timing.decode_step_s(point.batch_size, point.context_tokens)


def point_id(point: CalibrationPoint) -> str:
    return f"{point.kind}-{point.gpu}-{point.model}-b{point.batch_size}"


@pytest.mark.parametrize("point", CALIBRATION_POINTS, ids=point_id)
def test_the_model_lands_within_tolerance_of_each_published_figure(
    point: CalibrationPoint,
) -> None:
    assert predict(point) == pytest.approx(point.measured_s, rel=point.tolerance_ratio), point.setup


@pytest.mark.parametrize("point", CALIBRATION_POINTS, ids=point_id)
def test_each_point_records_the_prediction_the_model_makes_today(point: CalibrationPoint) -> None:
    assert predict(point) == pytest.approx(point.predicted_s, rel=0.005)


def test_every_point_cites_a_source_and_its_setup() -> None:
    for point in CALIBRATION_POINTS:
        assert "http" in point.source or "/" in point.source
        assert "vLLM" in point.setup or "vLLM" in point.source
        assert point.published
        assert 0 < point.tolerance_ratio <= 0.25
        assert point.model in MODELS
        assert point.gpu in GPUS


def test_h100_is_fitted_at_batch_1_at_batch_200_and_at_a_ttft() -> None:
    fitted = [p for p in CALIBRATION_POINTS if p.fitted and p.gpu == "h100-sxm"]
    decode_batches = {p.batch_size for p in fitted if p.kind in ("decode", "decode-gpu")}
    assert min(decode_batches) == 1
    assert max(decode_batches) >= 200
    assert any(p.kind == "ttft" for p in fitted)


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


def test_the_activations_a_token_moves_are_counted_from_the_layer_s_kernels() -> None:
    # Llama-3.1-8B by hand (hidden 4096, q 4096, k and v 1024 each, MLP 14336):
    # matmuls in and out: (4096 + 4096 + 2048) + (4096 + 4096) + (4096 + 28672) + (14336 + 4096);
    # elementwise: 8 x 4096 (two add-norms) + 2 x (4096 + 1024) (rotary) + 2 x 4096 (attention's
    # q in, output out) + 3 x 14336 (the gated activation).
    traffic = activation_traffic(MODELS["llama-3.1-8b"], 1)
    assert traffic.matmul == 69632
    assert traffic.elementwise == 94208
    # Split two ways, heads and the MLP halve; the hidden state does not.
    split = activation_traffic(MODELS["llama-3.1-8b"], 2)
    assert split.elementwise == 8 * 4096 + 2 * (2048 + 512) + 2 * 2048 + 3 * 7168


def test_async_scheduling_hides_the_host_s_cpu_behind_the_gpu_and_without_it_adds_it() -> None:
    overlapped = model_for(async_scheduling=True).decode_price(16, 1024)
    serial = model_for(async_scheduling=False).decode_price(16, 1024)
    assert overlapped.gpu_s == pytest.approx(serial.gpu_s)
    assert overlapped.step_s == pytest.approx(max(overlapped.gpu_s, overlapped.cpu_s))
    assert serial.step_s == pytest.approx(serial.gpu_s + serial.cpu_s)
    # On a datacenter host the CPU's part of a 16-request step is CPU_STEP_S + 16 CPU_REQUEST_S.
    assert serial.cpu_s == pytest.approx(CPU_STEP_S + 16 * CPU_REQUEST_S)


def test_a_small_model_on_a_slow_host_steps_at_its_cpu_s_pace() -> None:
    timing = model_for("qwen2.5-0.5b", "l4")
    one, many = timing.decode_price(1, 320), timing.decode_price(32, 320)
    assert one.step_s == one.cpu_s and many.step_s == many.cpu_s
    # The published L4 steps (5.1 ms at 1 stream, 7.1 at 32) differ by 2.0 ms over 31 requests.
    assert (many.step_s - one.step_s) / 31 == pytest.approx(2.0e-3 / 31, rel=0.02)


def test_the_api_server_s_work_is_its_kind_plus_each_text_token() -> None:
    api = ApiServerTiming(
        completion_request_s=1e-3,
        chat_request_s=2e-3,
        tokenize_s_per_token=1e-6,
        latency_s=3e-3,
        response_s=5e-4,
    )
    assert api.request_work_s("completion", 0) == pytest.approx(1.0e-3)
    assert api.request_work_s("completion", 500) == pytest.approx(1.5e-3)
    assert api.request_work_s("chat", 50) == pytest.approx(2.05e-3)
    assert api.alone_s("chat", 50) == pytest.approx(5.05e-3)


def test_a_host_scales_the_measured_api_server_work_by_its_cpu() -> None:
    host = HOSTS["small-vm"]
    api = api_server_timing(host)
    measured = API_SERVER_MEASURED_S
    assert api.completion_request_s == pytest.approx(
        measured["completion_request"] * host.cpu_scale
    )
    assert api.tokenize_s_per_token == pytest.approx(
        measured["tokenize_per_token"] * host.cpu_scale
    )
    assert api.response_s == pytest.approx(measured["response"] * host.cpu_scale)
    assert api.latency_s == host.request_latency_s


def test_fp8_kv_speeds_up_long_context_decode_only() -> None:
    bf16, fp8 = model_for(dtype="auto"), model_for(dtype="fp8")
    assert fp8.decode_step_s(64, 8192) < 0.8 * bf16.decode_step_s(64, 8192)
    assert fp8.decode_step_s(1, 16) == pytest.approx(bf16.decode_step_s(1, 16), rel=0.01)


def test_faster_gpus_step_faster() -> None:
    order = ["l4", "l40s", "a100-80gb", "h100-sxm", "h200"]
    decode = [model_for(gpu=gpu).decode_price(16, 1024).gpu_s for gpu in order]
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
