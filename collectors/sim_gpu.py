"""The simulated replica's modelled GPUs, read from its own `slotop_sim_gpu_*` gauges in a scrape.

`slotop sim` models its GPUs (busy time, memory, power) and says so in its family names; a real
vLLM replica has none of them, so a real replica's snapshot has no simulated GPU. The devices are
NVML's GpuDevice with the fields the sim cannot know (clocks, temperature, throttling, processes)
left None, so every screen that shows a GPU can show them, marked simulated.
"""

from __future__ import annotations

import math

from slotop.collectors.gpu.reader import GpuDevice, GpuSnapshot
from slotop.collectors.reading import Reading

_SIM_GPU_LABEL = "gpu"


def _by_gpu(reading: Reading, key: str) -> dict[str, float]:
    """One simulated-GPU gauge by its `gpu` label; series without one, or not finite, left out."""
    found: dict[str, float] = {}
    for labels, value in (reading.gauges.get(key) or {}).items():
        gpu = dict(labels).get(_SIM_GPU_LABEL)
        if gpu is not None and math.isfinite(value):
            found[gpu] = value
    return found


def _gpu_order(label: str) -> tuple[int, str]:
    return (int(label), "") if label.isdigit() else (1 << 30, label)


def simulated_gpu(reading: Reading, taken_at_s: float) -> GpuSnapshot | None:
    """The simulated replica's modelled GPUs (`slotop_sim_gpu_*`), None when the replica has none."""
    utilization = _by_gpu(reading, "sim_gpu_utilization")
    used = _by_gpu(reading, "sim_gpu_memory_used")
    total = _by_gpu(reading, "sim_gpu_memory_total")
    power = _by_gpu(reading, "sim_gpu_power")
    limit = _by_gpu(reading, "sim_gpu_power_limit")
    names: dict[str, str] = {}
    for labels in reading.gauges.get("sim_gpu_info") or {}:
        label = dict(labels)
        if _SIM_GPU_LABEL in label and label.get("name"):
            names[label[_SIM_GPU_LABEL]] = label["name"]
    gpus = sorted({*utilization, *used, *total, *power, *limit}, key=_gpu_order)
    if not gpus:
        return None

    def whole(values: dict[str, float], gpu: str) -> int | None:
        value = values.get(gpu)
        return None if value is None else round(value)

    devices = tuple(
        GpuDevice(
            index=int(gpu) if gpu.isdigit() else None,
            uuid=None,
            name=names.get(gpu),
            gpu_util_pct=None if gpu not in utilization else round(utilization[gpu] * 100),
            mem_util_pct=None,
            memory_used_bytes=whole(used, gpu),
            memory_total_bytes=whole(total, gpu),
            power_draw_w=power.get(gpu),
            power_limit_w=limit.get(gpu),
            sm_clock_mhz=None,
            temperature_c=None,
            throttle_reasons=None,
            processes=None,
        )
        for gpu in gpus
    )
    return GpuSnapshot(taken_at_s=taken_at_s, devices=devices)
