"""The pynvml adapter, throttle-reason decoding, and the real NVML (skipped without a GPU)."""

from __future__ import annotations

import ctypes
import sys
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from slotop.collectors.gpu.nvml import (
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNINITIALIZED,
    PYNVML_NOT_INSTALLED,
    THROTTLE_REASON_BITS,
    NvmlError,
    PynvmlApi,
    decode_throttle_reasons,
)
from slotop.collectors.gpu.reader import GpuReader


@pytest.mark.parametrize(
    ("mask", "words"),
    [
        (0x0, ()),
        (0x4, ("sw_power_cap",)),
        (0x1 | 0x40, ("gpu_idle", "hw_thermal_slowdown")),
        (0x1FF, tuple(word for _, word in THROTTLE_REASON_BITS)),
        (0x200, ("unknown_0x200",)),
        (0x100 | 0x800, ("display_clock_setting", "unknown_0x800")),
    ],
)
def test_decode_throttle_reasons(mask: int, words: tuple[str, ...]) -> None:
    assert decode_throttle_reasons(mask) == words


def _raises(code: int) -> Any:
    def call(*_: Any) -> Any:
        raise pynvml.NVMLError(code)

    return call


def _module(**functions: Any) -> SimpleNamespace:
    """A stand-in for pynvml: its real error classes, with the functions given."""
    base: dict[str, Any] = {
        "NVMLError": pynvml.NVMLError,
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
    }
    base.update(functions)
    return SimpleNamespace(**base)


def test_nvml_errors_become_nvml_error_with_code_and_call() -> None:
    api = PynvmlApi(_module(nvmlDeviceGetPowerUsage=_raises(pynvml.NVML_ERROR_NOT_SUPPORTED)))
    with pytest.raises(NvmlError) as caught:
        api.power_draw_mw(object())
    assert caught.value.code == NVML_ERROR_NOT_SUPPORTED
    assert "nvmlDeviceGetPowerUsage" in str(caught.value)
    assert "Not Supported" in str(caught.value)


def test_values_are_unpacked_into_plain_numbers() -> None:
    api = PynvmlApi(
        _module(
            nvmlDeviceGetUtilizationRates=lambda h: SimpleNamespace(gpu=91, memory=33),
            nvmlDeviceGetMemoryInfo=lambda h: SimpleNamespace(used=5, total=80, free=75),
            nvmlDeviceGetClockInfo=lambda h, clock: {1: 1755}[clock],
            nvmlDeviceGetTemperature=lambda h, sensor: {0: 48}[sensor],
            nvmlDeviceGetComputeRunningProcesses=lambda h: [
                SimpleNamespace(pid=11, usedGpuMemory=2048),
                SimpleNamespace(pid=12, usedGpuMemory=None),
            ],
            nvmlSystemGetProcessName=lambda pid: f"proc{pid}",
        )
    )
    handle = object()
    assert api.utilization_pct(handle) == (91, 33)
    assert api.memory_bytes(handle) == (5, 80)
    assert api.sm_clock_mhz(handle) == 1755
    assert api.temperature_c(handle) == 48
    assert [(p.pid, p.used_memory_bytes) for p in api.compute_processes(handle)] == [
        (11, 2048),
        (12, None),
    ]
    assert api.process_name(11) == "proc11"


@pytest.mark.parametrize(
    ("functions", "expected"),
    [
        ({"nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0x8}, 0x8),
        (
            {
                "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x20,
                "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0x8,
            },
            0x20,
        ),
        (
            {
                "nvmlDeviceGetCurrentClocksEventReasons": _raises(NVML_ERROR_FUNCTION_NOT_FOUND),
                "nvmlDeviceGetCurrentClocksThrottleReasons": lambda h: 0x8,
            },
            0x8,
        ),
    ],
)
def test_throttle_reasons_fall_back_to_the_old_call(
    functions: dict[str, Any], expected: int
) -> None:
    assert PynvmlApi(_module(**functions)).throttle_reasons_mask(object()) == expected


def test_throttle_reasons_refusal_is_not_hidden_by_the_fallback() -> None:
    api = PynvmlApi(
        _module(
            nvmlDeviceGetCurrentClocksEventReasons=_raises(NVML_ERROR_NOT_SUPPORTED),
            nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x8,
        )
    )
    with pytest.raises(NvmlError) as caught:
        api.throttle_reasons_mask(object())
    assert caught.value.code == NVML_ERROR_NOT_SUPPORTED


def test_calls_before_init_are_refused() -> None:
    with pytest.raises(NvmlError) as caught:
        PynvmlApi().device_count()
    assert caught.value.code == NVML_ERROR_UNINITIALIZED


def test_missing_pynvml_is_a_state(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(NvmlError) as caught:
        PynvmlApi().init()
    assert caught.value.code == PYNVML_NOT_INSTALLED
    snapshot = GpuReader(environ={}).read()
    assert snapshot.unavailable_reason == "no NVIDIA GPU visible (nvidia-ml-py is not installed)"


def _nvml_library_loads() -> bool:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return False
    return True


def test_real_pynvml_never_raises_and_names_a_missing_library() -> None:
    with GpuReader(environ={}) as reader:
        snapshot = reader.read()
    if snapshot.visible:
        assert snapshot.devices
    elif not _nvml_library_loads():
        assert snapshot.unavailable_reason == "no NVIDIA GPU visible (NVML library not found)"
    else:
        assert snapshot.unavailable_reason is not None


@pytest.mark.gpu
def test_real_gpu_reports_sane_values() -> None:
    with GpuReader() as reader:
        first = reader.read()
        second = reader.read()
    if not first.visible:
        pytest.skip(f"needs a real NVIDIA GPU: {first.unavailable_reason}")
    assert second.visible and len(second.devices) == len(first.devices) >= 1
    assert first.driver_version
    for device in second.devices:
        assert device.name and device.uuid and device.uuid.startswith(("GPU-", "MIG-"))
        assert device.memory_total_bytes is not None and device.memory_total_bytes > 2**30
        assert device.memory_used_bytes is not None
        assert 0 <= device.memory_used_bytes <= device.memory_total_bytes
        if device.index is not None and device.uuid.startswith("GPU-"):
            assert device.gpu_util_pct is not None and 0 <= device.gpu_util_pct <= 100
            assert device.mem_util_pct is not None and 0 <= device.mem_util_pct <= 100
            assert device.temperature_c is not None and 0 < device.temperature_c < 120
            assert device.sm_clock_mhz is not None and 0 < device.sm_clock_mhz < 5000
            assert device.power_draw_w is not None and 0 < device.power_draw_w < 2000
            assert device.power_limit_w is not None and device.power_limit_w > 50
            assert device.throttle_reasons is not None
        if device.processes is not None:
            assert all(process.pid > 0 for process in device.processes)


def test_old_driver_process_listing_falls_back_to_v2() -> None:
    def mismatch(*_: Any) -> Any:
        raise pynvml.NVMLLibraryMismatchError("pyNVML newer than the driver")

    api = PynvmlApi(
        _module(
            NVMLLibraryMismatchError=pynvml.NVMLLibraryMismatchError,
            nvmlDeviceGetComputeRunningProcesses=mismatch,
            nvmlDeviceGetComputeRunningProcesses_v2=lambda h: [
                SimpleNamespace(pid=3, usedGpuMemory=7)
            ],
            nvmlDeviceGetGraphicsRunningProcesses=mismatch,
        )
    )
    assert [(p.pid, p.used_memory_bytes) for p in api.compute_processes(object())] == [(3, 7)]
    with pytest.raises(NvmlError) as caught:
        api.graphics_processes(object())
    assert caught.value.code == NVML_ERROR_FUNCTION_NOT_FOUND
