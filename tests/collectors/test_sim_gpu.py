"""The simulated replica's `slotop_sim_gpu_*` gauges become GPU readings marked simulated."""

from __future__ import annotations

import dataclasses

import httpx

from slotop.collectors.gpu.nvml import NVML_ERROR_LIBRARY_NOT_FOUND
from slotop.collectors.gpu.reader import GpuDevice, GpuReader, GpuSnapshot
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.report import snapshot_to_json
from slotop.collectors.sim_gpu import simulated_gpu
from slotop.collectors.snapshot import ShownGpu, shown_gpu
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.server import ServerThread
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import ServeOptions
from tests.support.fake_nvml import GIB, FakeGpu, FakeNvml
from tests.support.paths import CAPTURES

TWO_SIMULATED_GPUS = """\
# HELP slotop_sim_gpu_info SIMULATED: the GPU the simulated replica models.
# TYPE slotop_sim_gpu_info gauge
slotop_sim_gpu_info{gpu="0",name="NVIDIA H100 80GB HBM3"} 1.0
slotop_sim_gpu_info{gpu="1",name="NVIDIA H100 80GB HBM3"} 1.0
# TYPE slotop_sim_gpu_utilization_ratio gauge
slotop_sim_gpu_utilization_ratio{gpu="1"} 0.8549
slotop_sim_gpu_utilization_ratio{gpu="0"} 0.8549
# TYPE slotop_sim_gpu_memory_used_bytes gauge
slotop_sim_gpu_memory_used_bytes{gpu="0"} 7.6526028390e+10
slotop_sim_gpu_memory_used_bytes{gpu="1"} 7.6526028390e+10
# TYPE slotop_sim_gpu_memory_total_bytes gauge
slotop_sim_gpu_memory_total_bytes{gpu="0"} 8.5030305710e+10
slotop_sim_gpu_memory_total_bytes{gpu="1"} 8.5030305710e+10
# TYPE slotop_sim_gpu_power_watts gauge
slotop_sim_gpu_power_watts{gpu="0"} 431.5
slotop_sim_gpu_power_watts{gpu="1"} 431.5
# TYPE slotop_sim_gpu_power_limit_watts gauge
slotop_sim_gpu_power_limit_watts{gpu="0"} 700.0
slotop_sim_gpu_power_limit_watts{gpu="1"} 700.0
# TYPE slotop_sim_gpu_compute_utilization_ratio gauge
slotop_sim_gpu_compute_utilization_ratio{gpu="0"} 0.1
"""


def _device(index: int) -> GpuDevice:
    return GpuDevice(
        index=index,
        uuid=None,
        name="NVIDIA H100 80GB HBM3",
        gpu_util_pct=85,
        mem_util_pct=None,
        memory_used_bytes=76_526_028_390,
        memory_total_bytes=85_030_305_710,
        power_draw_w=431.5,
        power_limit_w=700.0,
        sm_clock_mhz=None,
        temperature_c=None,
        throttle_reasons=None,
        processes=None,
    )


def test_each_simulated_gpu_becomes_a_device_in_rank_order() -> None:
    reading = read_metrics_text(TWO_SIMULATED_GPUS)
    assert reading.missing  # a page of sim GPUs alone lacks vLLM's families, and says so
    gpu = simulated_gpu(reading, taken_at_s=5.0)
    assert gpu == GpuSnapshot(taken_at_s=5.0, devices=(_device(0), _device(1)))


def test_a_series_without_a_gpu_label_or_with_a_nan_is_left_out() -> None:
    text = TWO_SIMULATED_GPUS.replace(
        'slotop_sim_gpu_power_watts{gpu="1"} 431.5', 'slotop_sim_gpu_power_watts{gpu="1"} NaN'
    ).replace(
        'slotop_sim_gpu_utilization_ratio{gpu="1"} 0.8549', "slotop_sim_gpu_utilization_ratio 0.5"
    )
    gpu = simulated_gpu(read_metrics_text(text), taken_at_s=5.0)
    assert gpu is not None
    second = gpu.devices[1]
    assert (second.index, second.gpu_util_pct, second.power_draw_w) == (1, None, None)
    assert second.memory_used_bytes == 76_526_028_390


def test_a_real_replica_has_no_simulated_gpu() -> None:
    text = (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8")
    snapshot = snapshot_of_dump(text, where="capture", taken_at_s=1.0)
    assert snapshot.simulated_gpu is None
    assert snapshot_to_json(snapshot, source="metrics-file")["simulated_gpu"] is None


def test_the_simulated_replica_is_read_as_one_simulated_gpu_per_rank() -> None:
    config = resolve_engine_config(
        MODELS["llama-3.1-8b"], GPUS["h100-sxm"], tensor_parallel_size=2, max_model_len=4096
    )
    options = ServeOptions("127.0.0.1", 0, ("sim-model",), None, 0.002)
    with ServerThread(config, options) as server:
        text = httpx.get(server.url + "/metrics", timeout=30).text
    snapshot = snapshot_of_dump(text, where="sim", taken_at_s=2.0)
    assert snapshot.missing == () and snapshot.unknown == ()
    gpu = snapshot.simulated_gpu
    assert gpu is not None and [d.index for d in gpu.devices] == [0, 1]
    for device in gpu.devices:
        assert device.name == "NVIDIA H100 80GB HBM3"
        assert device.gpu_util_pct == 0  # nothing ran yet
        assert device.power_draw_w == 140.0  # H100 SXM idle in P0
        assert device.power_limit_w == 700.0  # datasheet TDP
        assert device.memory_total_bytes == round(79.19 * GIB)
        assert device.memory_used_bytes is not None
        assert 0.89 * 79.19 * GIB < device.memory_used_bytes <= 0.9 * 79.19 * GIB + 1
    data = snapshot_to_json(snapshot, source="metrics-file")["simulated_gpu"]
    assert [d["power_limit_w"] for d in data["devices"]] == [700.0, 700.0]


def test_a_real_nvml_reading_wins_over_the_simulated_one() -> None:
    simulated = simulated_gpu(read_metrics_text(TWO_SIMULATED_GPUS), taken_at_s=5.0)
    assert simulated is not None
    text = (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8")
    snapshot = snapshot_of_dump(text, where="capture", taken_at_s=1.0)
    demo = dataclasses.replace(snapshot, simulated_gpu=simulated)
    nvml = GpuReader(FakeNvml([FakeGpu("GPU-aaaa-0000")]), environ={}).read()
    assert shown_gpu(nvml, demo) == ShownGpu(nvml, simulated=False)
    blind = GpuReader(FakeNvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND), environ={}).read()
    assert not blind.visible
    assert shown_gpu(blind, demo) == ShownGpu(simulated, simulated=True)
    assert shown_gpu(None, demo) == ShownGpu(simulated, simulated=True)
    assert shown_gpu(blind, snapshot) == ShownGpu(blind, simulated=False)
    assert shown_gpu(None, snapshot) is None
    assert shown_gpu(None, None) is None
