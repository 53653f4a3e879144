"""The few NVML calls slotop makes, behind a protocol, with `pynvml` adapted to it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Protocol

from slotop.collectors.errors import CollectorError

# NVML return codes slotop tells apart (nvml.h `nvmlReturn_t`), plus one of its own.
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999
PYNVML_NOT_INSTALLED = -1
"""Not an NVML code: the `pynvml` module (distribution nvidia-ml-py) cannot be imported."""

_NVML_CLOCK_SM = 1
_NVML_TEMPERATURE_GPU = 0

# Clock event (formerly "throttle") reason bits, from nvml.h, in the order NVML lists them.
THROTTLE_REASON_BITS: tuple[tuple[int, str], ...] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks_setting"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


class NvmlError(CollectorError):
    """An NVML call failed; `code` is NVML's return code (or PYNVML_NOT_INSTALLED)."""

    def __init__(self, call: str, code: int, detail: str) -> None:
        super().__init__(f"NVML call {call} failed: {detail} (code {code})")
        self.call = call
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class NvmlProcess:
    """One process NVML lists on a device; used memory is None where NVML cannot tell."""

    pid: int
    used_memory_bytes: int | None


class NvmlApi(Protocol):
    """The NVML calls slotop uses; every method raises NvmlError when NVML refuses."""

    def init(self) -> None:
        """Load and initialise NVML."""

    def shutdown(self) -> None:
        """Release NVML."""

    def driver_version(self) -> str:
        """Return the kernel driver's version string."""

    def device_count(self) -> int:
        """Return how many devices NVML sees (ignoring CUDA_VISIBLE_DEVICES)."""

    def handle_by_index(self, index: int) -> object:
        """Return the handle of the device at NVML index `index`."""

    def handle_by_uuid(self, uuid: str) -> object:
        """Return the handle of a device or MIG instance by its full UUID."""

    def uuid(self, handle: object) -> str:
        """Return the device's UUID (`GPU-...` or `MIG-...`)."""

    def index(self, handle: object) -> int:
        """Return the device's NVML index."""

    def name(self, handle: object) -> str:
        """Return the product name."""

    def utilization_pct(self, handle: object) -> tuple[int, int]:
        """Return (GPU busy %, memory controller busy %) over NVML's last sample period."""

    def memory_bytes(self, handle: object) -> tuple[int, int]:
        """Return (used, total) device memory in bytes."""

    def power_draw_mw(self, handle: object) -> int:
        """Return the power draw in milliwatts."""

    def power_limit_mw(self, handle: object) -> int:
        """Return the enforced power limit in milliwatts."""

    def sm_clock_mhz(self, handle: object) -> int:
        """Return the current SM clock in MHz."""

    def temperature_c(self, handle: object) -> int:
        """Return the GPU die temperature in degrees Celsius."""

    def throttle_reasons_mask(self, handle: object) -> int:
        """Return the bit mask of reasons the clocks are held down."""

    def compute_processes(self, handle: object) -> list[NvmlProcess]:
        """Return the compute processes running on the device."""

    def graphics_processes(self, handle: object) -> list[NvmlProcess]:
        """Return the graphics processes running on the device."""

    def process_name(self, pid: int) -> str:
        """Return the name NVML gives the process `pid`."""


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Turn NVML's clock event reason mask into words, unknown bits as `unknown_0x...`."""
    words = [word for bit, word in THROTTLE_REASON_BITS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASON_BITS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            words.append(f"unknown_0x{bit:x}")
            rest &= ~bit
        bit <<= 1
    return tuple(words)


class PynvmlApi:
    """NvmlApi over the `pynvml` module, which is imported on `init` (or injected for tests)."""

    def __init__(self, module: Any = None) -> None:
        self._module: Any = module

    def _call(self, call: str, *args: Any) -> Any:
        """Run the pynvml function named `call`, turning its NVMLError into NvmlError."""
        module = self._module
        if module is None:
            raise NvmlError(call, NVML_ERROR_UNINITIALIZED, "NVML is not initialised")
        fn = getattr(module, call, None)
        if fn is None:
            raise NvmlError(call, NVML_ERROR_FUNCTION_NOT_FOUND, "this pynvml lacks it")
        mismatch = getattr(module, "NVMLLibraryMismatchError", module.NVMLError)
        try:
            return fn(*args)
        except module.NVMLError as exc:
            code = int(getattr(exc, "value", NVML_ERROR_UNKNOWN))
            raise NvmlError(call, code, str(exc)) from exc
        except mismatch as exc:
            raise NvmlError(call, NVML_ERROR_FUNCTION_NOT_FOUND, str(exc)) from exc

    def init(self) -> None:
        """Import pynvml if needed, then call nvmlInit."""
        if self._module is None:
            try:
                self._module = importlib.import_module("pynvml")
            except ImportError as exc:
                raise NvmlError("import pynvml", PYNVML_NOT_INSTALLED, str(exc)) from exc
        self._call("nvmlInit")

    def shutdown(self) -> None:
        """Call nvmlShutdown."""
        self._call("nvmlShutdown")

    def driver_version(self) -> str:
        """Return the driver version."""
        return str(self._call("nvmlSystemGetDriverVersion"))

    def device_count(self) -> int:
        """Return the device count."""
        return int(self._call("nvmlDeviceGetCount"))

    def handle_by_index(self, index: int) -> object:
        """Return a handle by NVML index."""
        handle: object = self._call("nvmlDeviceGetHandleByIndex", index)
        return handle

    def handle_by_uuid(self, uuid: str) -> object:
        """Return a handle by UUID."""
        handle: object = self._call("nvmlDeviceGetHandleByUUID", uuid)
        return handle

    def uuid(self, handle: object) -> str:
        """Return the UUID."""
        return str(self._call("nvmlDeviceGetUUID", handle))

    def index(self, handle: object) -> int:
        """Return the NVML index."""
        return int(self._call("nvmlDeviceGetIndex", handle))

    def name(self, handle: object) -> str:
        """Return the product name."""
        return str(self._call("nvmlDeviceGetName", handle))

    def utilization_pct(self, handle: object) -> tuple[int, int]:
        """Return (GPU %, memory %)."""
        rates = self._call("nvmlDeviceGetUtilizationRates", handle)
        return int(rates.gpu), int(rates.memory)

    def memory_bytes(self, handle: object) -> tuple[int, int]:
        """Return (used, total) bytes."""
        info = self._call("nvmlDeviceGetMemoryInfo", handle)
        return int(info.used), int(info.total)

    def power_draw_mw(self, handle: object) -> int:
        """Return the power draw in milliwatts."""
        return int(self._call("nvmlDeviceGetPowerUsage", handle))

    def power_limit_mw(self, handle: object) -> int:
        """Return the enforced power limit in milliwatts."""
        return int(self._call("nvmlDeviceGetEnforcedPowerLimit", handle))

    def sm_clock_mhz(self, handle: object) -> int:
        """Return the SM clock in MHz."""
        return int(self._call("nvmlDeviceGetClockInfo", handle, _NVML_CLOCK_SM))

    def temperature_c(self, handle: object) -> int:
        """Return the die temperature."""
        return int(self._call("nvmlDeviceGetTemperature", handle, _NVML_TEMPERATURE_GPU))

    def throttle_reasons_mask(self, handle: object) -> int:
        """Return the clock event reasons, falling back to the pre-R535 name."""
        try:
            return int(self._call("nvmlDeviceGetCurrentClocksEventReasons", handle))
        except NvmlError as exc:
            if exc.code != NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
        return int(self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle))

    def _processes(self, call: str, handle: object) -> list[NvmlProcess]:
        """List processes with the newest call this driver has, then its `_v2` form."""
        try:
            found = self._call(call, handle)
        except NvmlError as exc:
            if exc.code != NVML_ERROR_FUNCTION_NOT_FOUND:
                raise
            found = self._call(f"{call}_v2", handle)
        return [
            NvmlProcess(
                pid=int(proc.pid),
                used_memory_bytes=None if proc.usedGpuMemory is None else int(proc.usedGpuMemory),
            )
            for proc in found
        ]

    def compute_processes(self, handle: object) -> list[NvmlProcess]:
        """Return the compute processes."""
        return self._processes("nvmlDeviceGetComputeRunningProcesses", handle)

    def graphics_processes(self, handle: object) -> list[NvmlProcess]:
        """Return the graphics processes."""
        return self._processes("nvmlDeviceGetGraphicsRunningProcesses", handle)

    def process_name(self, pid: int) -> str:
        """Return the process name NVML knows."""
        return str(self._call("nvmlSystemGetProcessName", pid))
