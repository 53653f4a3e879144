"""A fake NVML in memory (the NvmlApi protocol), for the GPU reader's tests and the dashboard's."""

from __future__ import annotations

from dataclasses import dataclass, field

from slotop.collectors.gpu.nvml import (
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_FOUND,
    NVML_ERROR_NOT_SUPPORTED,
    NVML_ERROR_UNINITIALIZED,
    NvmlError,
    NvmlProcess,
)

GIB = 2**30


@dataclass
class FakeGpu:
    """One device the fake NVML reports; `refuses` names the calls it answers NOT_SUPPORTED."""

    uuid: str
    name: str = "NVIDIA H200"
    utilization: tuple[int, int] = (87, 45)
    memory: tuple[int, int] = (120 * GIB, 141 * GIB)
    power_draw_mw: int = 512_500
    power_limit_mw: int = 700_000
    sm_clock: int = 1980
    temperature: int = 61
    throttle_mask: int = 0x4
    compute: list[NvmlProcess] = field(default_factory=list)
    graphics: list[NvmlProcess] = field(default_factory=list)
    refuses: frozenset[str] = frozenset()


class FakeNvml:
    """An NvmlApi in memory that counts its calls; handles are the FakeGpu objects."""

    def __init__(
        self,
        gpus: list[FakeGpu],
        *,
        migs: dict[str, FakeGpu] | None = None,
        init_error: int | None = None,
        count_error: int | None = None,
        process_names: dict[int, str] | None = None,
        driver: str | None = "550.54.15",
        shutdown_error: int | None = None,
    ) -> None:
        self.gpus = gpus
        self.migs = migs or {}
        self.init_error = init_error
        self.count_error = count_error
        self.process_names = process_names or {}
        self.driver = driver
        self.shutdown_error = shutdown_error
        self.calls: dict[str, int] = {}
        self.initialised = False

    def _count(self, call: str) -> None:
        self.calls[call] = self.calls.get(call, 0) + 1
        if call not in ("init",) and not self.initialised:
            raise NvmlError(call, NVML_ERROR_UNINITIALIZED, "Uninitialized")

    def _gpu(self, handle: object, call: str) -> FakeGpu:
        self._count(call)
        assert isinstance(handle, FakeGpu)
        if call in handle.refuses:
            raise NvmlError(call, NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        return handle

    def init(self) -> None:
        self._count("init")
        if self.init_error is not None:
            raise NvmlError("nvmlInit", self.init_error, f"fake init error {self.init_error}")
        self.initialised = True

    def shutdown(self) -> None:
        self._count("shutdown")
        self.initialised = False
        if self.shutdown_error is not None:
            raise NvmlError("nvmlShutdown", self.shutdown_error, "fake shutdown error")

    def driver_version(self) -> str:
        self._count("driver_version")
        if self.driver is None:
            raise NvmlError("driver_version", NVML_ERROR_NOT_SUPPORTED, "Not Supported")
        return self.driver

    def device_count(self) -> int:
        self._count("device_count")
        if self.count_error is not None:
            raise NvmlError("device_count", self.count_error, "fake count error")
        return len(self.gpus)

    def handle_by_index(self, index: int) -> object:
        self._count("handle_by_index")
        gpu = self.gpus[index]
        if "handle" in gpu.refuses:
            raise NvmlError("handle_by_index", NVML_ERROR_NO_PERMISSION, "no permission")
        return gpu

    def handle_by_uuid(self, uuid: str) -> object:
        self._count("handle_by_uuid")
        if uuid not in self.migs:
            raise NvmlError("handle_by_uuid", NVML_ERROR_NOT_FOUND, "Not Found")
        return self.migs[uuid]

    def uuid(self, handle: object) -> str:
        return self._gpu(handle, "uuid").uuid

    def index(self, handle: object) -> int:
        gpu = self._gpu(handle, "index")
        return self.gpus.index(gpu)

    def name(self, handle: object) -> str:
        return self._gpu(handle, "name").name

    def utilization_pct(self, handle: object) -> tuple[int, int]:
        return self._gpu(handle, "utilization_pct").utilization

    def memory_bytes(self, handle: object) -> tuple[int, int]:
        return self._gpu(handle, "memory_bytes").memory

    def power_draw_mw(self, handle: object) -> int:
        return self._gpu(handle, "power_draw_mw").power_draw_mw

    def power_limit_mw(self, handle: object) -> int:
        return self._gpu(handle, "power_limit_mw").power_limit_mw

    def sm_clock_mhz(self, handle: object) -> int:
        return self._gpu(handle, "sm_clock_mhz").sm_clock

    def temperature_c(self, handle: object) -> int:
        return self._gpu(handle, "temperature_c").temperature

    def throttle_reasons_mask(self, handle: object) -> int:
        return self._gpu(handle, "throttle_reasons_mask").throttle_mask

    def compute_processes(self, handle: object) -> list[NvmlProcess]:
        return list(self._gpu(handle, "compute_processes").compute)

    def graphics_processes(self, handle: object) -> list[NvmlProcess]:
        return list(self._gpu(handle, "graphics_processes").graphics)

    def process_name(self, pid: int) -> str:
        self._count("process_name")
        if pid not in self.process_names:
            raise NvmlError("process_name", NVML_ERROR_NOT_FOUND, "Not Found")
        return self.process_names[pid]
