"""The simulated GPUs: busy time over a window, roofline work and power, and their families on /metrics."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from slotop.sim.capacity import kv_capacity
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.gpu import GpuActivity, SimGpus
from slotop.sim.server import ServerThread
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import EngineConfig, ServeOptions

GIB = 1 << 30

# Llama-3.1-8B from its config.json: 8,030,261,248 parameters, of which two 128,256 × 4,096
# embedding tables (input and LM head); 32 layers, 32 query heads and 8 KV heads of 128.
LLAMA_8B_BODY_PARAMS = 8_030_261_248 - 2 * 128_256 * 4_096
LLAMA_8B_EMBEDDING_PARAMS = 128_256 * 4_096
LLAMA_8B_KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2
LLAMA_8B_ATTENTION_FLOPS_PER_PAIR = 4 * 32 * 32 * 128

# H100 SXM datasheet: 989.4 TFLOPS dense bf16, 3.35 TB/s, 700 W; idle in P0 measured at 140 W.
H100_PEAK_FLOPS = 989.4e12
H100_BANDWIDTH = 3.35e12
H100_TDP_W = 700.0
H100_IDLE_W = 140.0

SIM_GPU_FAMILIES = {
    "slotop_sim_gpu_info": "gauge",
    "slotop_sim_gpu_utilization_ratio": "gauge",
    "slotop_sim_gpu_compute_utilization_ratio": "gauge",
    "slotop_sim_gpu_memory_bandwidth_utilization_ratio": "gauge",
    "slotop_sim_gpu_memory_used_bytes": "gauge",
    "slotop_sim_gpu_memory_total_bytes": "gauge",
    "slotop_sim_gpu_memory_weights_bytes": "gauge",
    "slotop_sim_gpu_memory_kv_cache_bytes": "gauge",
    "slotop_sim_gpu_power_watts": "gauge",
    "slotop_sim_gpu_power_limit_watts": "gauge",
    "slotop_sim_gpu_busy_seconds": "counter",
}


def llama_on_h100(tensor_parallel_size: int = 1, **overrides: Any) -> EngineConfig:
    return resolve_engine_config(
        MODELS["llama-3.1-8b"],
        GPUS["h100-sxm"],
        tensor_parallel_size=tensor_parallel_size,
        max_model_len=4096,
        **overrides,
    )


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self, now_s: float) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


def decode_work(context_tokens: int, tensor_parallel_size: int = 1) -> tuple[float, float]:
    """FLOPs and HBM bytes of one batch-1 decode step on one GPU, worked from the shapes."""
    tp = tensor_parallel_size
    flops = (
        2 * LLAMA_8B_BODY_PARAMS / tp
        + 2 * LLAMA_8B_EMBEDDING_PARAMS / tp
        + LLAMA_8B_ATTENTION_FLOPS_PER_PAIR / tp * context_tokens
    )
    weights = (LLAMA_8B_BODY_PARAMS + LLAMA_8B_EMBEDDING_PARAMS) * 2 / tp
    kv_read_and_written = (context_tokens + 1) * LLAMA_8B_KV_BYTES_PER_TOKEN / tp
    return flops, weights + kv_read_and_written


def test_busy_time_counts_the_part_of_each_step_inside_the_window() -> None:
    activity = GpuActivity(llama_on_h100(), horizon_s=1.0)
    activity.record(0.0, 0.5, 1, 1, 100, 0, 0, 0)
    activity.record(0.9, 1.1, 1, 1, 100, 0, 0, 0)
    flops, _ = decode_work(100)
    inside = activity.over(0.1, 1.0)
    assert inside.busy_s == pytest.approx(0.4 + 0.1)
    assert inside.flops == pytest.approx(flops * 0.4 / 0.5 + flops * 0.1 / 0.2)
    assert activity.busy_s_total == pytest.approx(0.7)
    assert activity.over(1.1, 2.0).busy_s == 0.0


def test_steps_older_than_the_horizon_are_forgotten_but_still_counted_in_the_total() -> None:
    activity = GpuActivity(llama_on_h100(), horizon_s=1.0)
    for index in range(100):
        activity.record(index * 0.1, index * 0.1 + 0.05, 1, 1, 10, 0, 0, 0)
    assert activity.over(0.0, 5.0).busy_s == 0.0
    assert activity.over(8.85, 9.95).busy_s == pytest.approx(0.05 * 11)
    assert activity.busy_s_total == pytest.approx(5.0)


def test_one_decode_step_in_a_window_gives_the_hand_worked_utilisation_and_power() -> None:
    config = llama_on_h100()
    clock = FakeClock(100.0)
    gpus = SimGpus(config, kv_capacity(config), GpuActivity(config), clock=clock)
    assert gpus.reading().utilization_ratio == 0.0
    assert gpus.reading().power_w == H100_IDLE_W
    gpus.activity.record(10.0, 10.25, 1, 1, 1, 0, 0, 0)  # decode with one token of context
    gpus.sync(10.25)
    clock.now_s += 0.75  # simulated now 11.0: the window is [10.0, 11.0]
    reading = gpus.reading()
    flops, hbm_bytes = decode_work(1)
    assert reading.utilization_ratio == pytest.approx(0.25)
    assert reading.compute_utilization_ratio == pytest.approx(flops / H100_PEAK_FLOPS)
    assert reading.bandwidth_utilization_ratio == pytest.approx(hbm_bytes / H100_BANDWIDTH)
    load = flops / H100_PEAK_FLOPS + hbm_bytes / H100_BANDWIDTH
    assert reading.power_w == pytest.approx(H100_IDLE_W + (H100_TDP_W - H100_IDLE_W) * load)
    clock.now_s += 1.0
    assert gpus.reading().utilization_ratio == 0.0
    assert gpus.reading().power_w == H100_IDLE_W


def test_a_saturating_prefill_draws_the_board_limit_and_no_more() -> None:
    config = llama_on_h100()
    clock = FakeClock(0.0)
    gpus = SimGpus(config, kv_capacity(config), GpuActivity(config), clock=clock)
    tokens = 75_000  # 75k tokens × 14 GFLOP each ≈ 1.05 PFLOP: past a second at peak
    gpus.activity.record(0.0, 1.0, 1, 0, 0, tokens, tokens, tokens)
    gpus.sync(1.0)
    reading = gpus.reading()
    assert reading.compute_utilization_ratio > 1.0
    assert reading.power_w == H100_TDP_W


def test_memory_is_weights_activations_overheads_and_the_kv_pool_within_vllms_share() -> None:
    config = llama_on_h100()
    capacity = kv_capacity(config)
    reading = SimGpus(config, capacity, GpuActivity(config)).reading()
    requested = math.ceil(79.19 * GIB * 0.9)  # vLLM fills gpu_memory_utilization of the total
    assert requested - capacity.bytes_per_block < reading.memory_used_bytes <= requested
    weights = 8_030_261_248 * 2 + 131_072 * 128 * 2  # bf16 weights and the rotary cache
    assert reading.memory_weights_bytes == weights
    assert reading.memory_kv_cache_bytes == capacity.num_gpu_blocks * 16 * 131_072


@pytest.fixture
def tp2_server() -> Iterator[ServerThread]:
    options = ServeOptions("127.0.0.1", 0, ("sim-model",), None, 0.002)
    with ServerThread(llama_on_h100(tensor_parallel_size=2, seed=3), options) as running:
        yield running


def _gpu_samples(client: httpx.Client) -> tuple[dict[str, str], dict[tuple[str, str], float]]:
    kinds: dict[str, str] = {}
    values: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        if family.name.startswith("slotop_sim_gpu"):
            kinds[family.name] = family.type
            for sample in family.samples:
                values[(sample.name, sample.labels["gpu"])] = sample.value
                if family.name == "slotop_sim_gpu_info":
                    assert sample.labels["name"] == "NVIDIA H100 80GB HBM3"
    return kinds, values


def test_the_replica_serves_one_series_per_tensor_parallel_rank(tp2_server: ServerThread) -> None:
    with httpx.Client(base_url=tp2_server.url, timeout=30.0) as client:
        kinds, idle = _gpu_samples(client)
        assert kinds == SIM_GPU_FAMILIES
        assert {rank for _, rank in idle} == {"0", "1"}
        for rank in ("0", "1"):
            assert idle[("slotop_sim_gpu_utilization_ratio", rank)] == 0.0
            assert idle[("slotop_sim_gpu_power_watts", rank)] == H100_IDLE_W
            assert idle[("slotop_sim_gpu_power_limit_watts", rank)] == H100_TDP_W
            assert idle[("slotop_sim_gpu_memory_total_bytes", rank)] == round(79.19 * GIB)
        # Each rank holds half the weights and half the KV heads.
        half_weights = 8_030_261_248 * 2 // 2 + 131_072 * 128 * 2
        assert idle[("slotop_sim_gpu_memory_weights_bytes", "1")] == half_weights
        body = {"prompt": "hello " * 50, "max_tokens": 600, "ignore_eos": True, "stream": True}
        with client.stream("POST", "/v1/completions", json=body) as response:
            chunks = 0
            for line in response.iter_lines():
                chunks += line.startswith("data: ")
                if chunks == 300:  # steps have run back to back for well over a window
                    _, busy = _gpu_samples(client)
        for rank in ("0", "1"):
            assert busy[("slotop_sim_gpu_utilization_ratio", rank)] > 0.9
            assert busy[("slotop_sim_gpu_power_watts", rank)] > H100_IDLE_W
            assert busy[("slotop_sim_gpu_busy_seconds_total", rank)] > 1.0
        assert (
            busy[("slotop_sim_gpu_power_watts", "0")] == busy[("slotop_sim_gpu_power_watts", "1")]
        )
        time.sleep(1.2)  # one window with no step
        _, after = _gpu_samples(client)
        assert after[("slotop_sim_gpu_utilization_ratio", "0")] == 0.0
        assert after[("slotop_sim_gpu_power_watts", "0")] == H100_IDLE_W
