"""GPU snapshots as JSON data and as plain text for the headless command."""

from __future__ import annotations

import json
from dataclasses import replace

from slotop.collectors.gpu.reader import (
    GpuDevice,
    GpuProcess,
    GpuSnapshot,
    format_gpu_text,
    gpu_snapshot_to_json,
)

GIB = 2**30

FULL = GpuDevice(
    index=1,
    uuid="GPU-aaab-1111",
    name="NVIDIA H200",
    gpu_util_pct=87,
    mem_util_pct=45,
    memory_used_bytes=120 * GIB,
    memory_total_bytes=140 * GIB,
    power_draw_w=512.5,
    power_limit_w=700.0,
    sm_clock_mhz=1980,
    temperature_c=61,
    throttle_reasons=("sw_power_cap",),
    processes=(
        GpuProcess(pid=4242, name="python3", used_memory_bytes=118 * GIB),
        GpuProcess(pid=7, name=None, used_memory_bytes=None),
    ),
)

BARE = GpuDevice(
    index=None,
    uuid="MIG-1234",
    name=None,
    gpu_util_pct=None,
    mem_util_pct=0,
    memory_used_bytes=0,
    memory_total_bytes=None,
    power_draw_w=None,
    power_limit_w=None,
    sm_clock_mhz=None,
    temperature_c=None,
    throttle_reasons=None,
    processes=None,
)

NOT_VISIBLE = GpuSnapshot(taken_at_s=12.5, unavailable_cause="NVML library not found")
VISIBLE = GpuSnapshot(
    taken_at_s=12.5,
    devices=(FULL, BARE),
    driver_version="550.54.15",
    selection_note="CUDA_VISIBLE_DEVICES entry '7' is not a device index (NVML sees 2); ...",
)


def test_json_when_none_is_visible() -> None:
    assert gpu_snapshot_to_json(NOT_VISIBLE) == {
        "taken_at_s": 12.5,
        "visible": False,
        "reason": "no NVIDIA GPU visible (NVML library not found)",
    }


def test_json_keeps_units_in_keys_and_missing_as_null() -> None:
    data = gpu_snapshot_to_json(VISIBLE)
    assert json.loads(json.dumps(data)) == data
    assert data["visible"] is True
    assert data["driver_version"] == "550.54.15"
    assert data["selection_note"] == VISIBLE.selection_note
    full, bare = data["devices"]
    assert full == {
        "index": 1,
        "uuid": "GPU-aaab-1111",
        "name": "NVIDIA H200",
        "gpu_util_pct": 87,
        "mem_util_pct": 45,
        "memory_used_bytes": 120 * GIB,
        "memory_total_bytes": 140 * GIB,
        "power_draw_w": 512.5,
        "power_limit_w": 700.0,
        "sm_clock_mhz": 1980,
        "temperature_c": 61,
        "throttle_reasons": ["sw_power_cap"],
        "processes": [
            {"pid": 4242, "name": "python3", "used_memory_bytes": 118 * GIB},
            {"pid": 7, "name": None, "used_memory_bytes": None},
        ],
    }
    assert bare["index"] is None and bare["gpu_util_pct"] is None
    assert bare["mem_util_pct"] == 0 and bare["memory_used_bytes"] == 0
    assert bare["throttle_reasons"] is None and bare["processes"] is None
    assert set(bare) == set(full)


def test_text_when_none_is_visible() -> None:
    assert format_gpu_text(NOT_VISIBLE) == "GPU: none visible (NVML library not found)"


def test_text_lists_every_device_with_na_for_missing() -> None:
    lines = format_gpu_text(VISIBLE).splitlines()
    assert lines[0] == "GPU: 2 visible, driver 550.54.15"
    assert lines[1] == f"  note: {VISIBLE.selection_note}"
    assert lines[2] == (
        "  GPU 1 NVIDIA H200: util 87%  mem-util 45%  mem 120.0/140.0 GiB  power 512/700 W"
        "  SM 1980 MHz  temp 61 C"
    )
    assert lines[3] == "    throttle: sw_power_cap"
    assert lines[4] == "    pid 4242 python3: 118.0 GiB"
    assert lines[5] == "    pid 7 N/A: N/A GiB"
    assert lines[6] == (
        "  MIG-1234 N/A: util N/A  mem-util 0%  mem 0.0/N/A GiB  power N/A/N/A W  SM N/A  temp N/A"
    )
    assert lines[7:] == ["    throttle: N/A", "    processes: N/A"]


def test_text_says_none_for_empty_throttle_and_process_lists() -> None:
    idle = GpuSnapshot(
        taken_at_s=0.0,
        devices=(replace(FULL, throttle_reasons=(), processes=()),),
    )
    lines = format_gpu_text(idle).splitlines()
    assert lines[0] == "GPU: 1 visible"
    assert lines[2:] == ["    throttle: none", "    processes: none"]
