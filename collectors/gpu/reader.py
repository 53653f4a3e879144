"""GPU state through NVML: typed snapshots, a reader that inits NVML once, JSON and text forms.

Every NVML refusal while reading a field is turned into None in one place (`GpuReader._field`);
a box without a GPU, driver or NVML library gives a snapshot that says why none is visible.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeVar

from slotop import fmt
from slotop.collectors.errors import CollectorError
from slotop.collectors.gpu.nvml import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    PYNVML_NOT_INSTALLED,
    NvmlApi,
    NvmlError,
    NvmlProcess,
    PynvmlApi,
    decode_throttle_reasons,
)
from slotop.collectors.gpu.visible import (
    Selection,
    parse_cuda_visible_devices,
    resolve_indices,
    resolve_visible,
)

_T = TypeVar("_T")

_INIT_CAUSES = {
    PYNVML_NOT_INSTALLED: "nvidia-ml-py is not installed",
    NVML_ERROR_LIBRARY_NOT_FOUND: "NVML library not found",
    NVML_ERROR_DRIVER_NOT_LOADED: "driver not loaded",
    NVML_ERROR_NO_PERMISSION: "no permission to open the NVIDIA devices",
    NVML_ERROR_LIB_RM_VERSION_MISMATCH: "NVML library and kernel driver versions differ; "
    "reload the driver or reboot",
}


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding a GPU: its pid, its name if NVML knows it, and its device memory."""

    pid: int
    name: str | None
    used_memory_bytes: int | None


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One GPU (or MIG instance) at one moment; a field the device does not report is None."""

    index: int | None
    uuid: str | None
    name: str | None
    gpu_util_pct: int | None
    mem_util_pct: int | None
    memory_used_bytes: int | None
    memory_total_bytes: int | None
    power_draw_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: int | None
    temperature_c: int | None
    throttle_reasons: tuple[str, ...] | None
    processes: tuple[GpuProcess, ...] | None


@dataclass(frozen=True, slots=True)
class GpuSnapshot:
    """Every selected GPU, in CUDA order, or the cause no GPU is visible."""

    taken_at_s: float
    devices: tuple[GpuDevice, ...] = ()
    unavailable_cause: str | None = None
    driver_version: str | None = None
    selection_note: str | None = None

    @property
    def visible(self) -> bool:
        """Whether any GPU could be read."""
        return self.unavailable_cause is None

    @property
    def unavailable_reason(self) -> str | None:
        """The sentence to show when no GPU is visible, e.g. 'no NVIDIA GPU visible (...)'."""
        if self.unavailable_cause is None:
            return None
        return f"no NVIDIA GPU visible ({self.unavailable_cause})"


def init_failure_cause(error: NvmlError) -> str:
    """Say in a few words why NVML would not start."""
    return _INIT_CAUSES.get(error.code, f"NVML init failed: {error.detail}")


@dataclass(frozen=True, slots=True)
class _Target:
    """A selected device's handle and the facts about it that do not change."""

    handle: object
    index: int | None
    uuid: str | None
    name: str | None


class GpuReader:
    """Reads the selected GPUs; NVML is initialised on the first read and shut down on close.

    `device_indices` (NVML indices from settings) wins over CUDA_VISIBLE_DEVICES, read from
    `environ`; None or () selects what CUDA_VISIBLE_DEVICES lets this process see.
    """

    def __init__(
        self,
        nvml: NvmlApi | None = None,
        *,
        device_indices: tuple[int, ...] | None = None,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._nvml: NvmlApi = nvml if nvml is not None else PynvmlApi()
        self._device_indices = device_indices or ()
        env = os.environ if environ is None else environ
        self._cuda_visible = env.get("CUDA_VISIBLE_DEVICES")
        self._clock = clock
        self._lock = threading.Lock()
        self._started = False
        self._initialised = False
        self._closed = False
        self._cause: str | None = None
        self._targets: tuple[_Target, ...] = ()
        self._driver_version: str | None = None
        self._note: str | None = None

    def __enter__(self) -> GpuReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def read(self) -> GpuSnapshot:
        """Read every selected GPU now; never raises for NVML trouble, only after close."""
        with self._lock:
            if self._closed:
                raise CollectorError("GpuReader.read called after close; create a new reader")
            if not self._started:
                self._started = True
                self._start()
            taken_at_s = self._clock()
            if self._cause is not None:
                return GpuSnapshot(taken_at_s=taken_at_s, unavailable_cause=self._cause)
            return GpuSnapshot(
                taken_at_s=taken_at_s,
                devices=tuple(self._read_device(target) for target in self._targets),
                driver_version=self._driver_version,
                selection_note=self._note,
            )

    def close(self) -> None:
        """Shut NVML down if this reader started it; safe to call more than once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._initialised:
                self._initialised = False
                self._field(self._nvml.shutdown)

    def _field(self, call: Callable[..., _T], *args: Any) -> _T | None:
        """Run one NVML call; the one place where its refusal becomes None."""
        try:
            return call(*args)
        except NvmlError:
            return None

    def _start(self) -> None:
        """Initialise NVML once and resolve which devices to read, or record why none."""
        spec = None if self._device_indices else parse_cuda_visible_devices(self._cuda_visible)
        if spec is not None and not spec.entries:
            self._cause = resolve_visible(spec, []).note
            return
        try:
            self._nvml.init()
        except NvmlError as exc:
            self._cause = init_failure_cause(exc)
            return
        self._initialised = True
        self._driver_version = self._field(self._nvml.driver_version)
        try:
            count = self._nvml.device_count()
        except NvmlError as exc:
            self._cause = f"NVML could not count devices: {exc.detail}"
            return
        handles = [self._field(self._nvml.handle_by_index, i) for i in range(count)]
        uuids = [None if h is None else self._field(self._nvml.uuid, h) for h in handles]
        if self._device_indices:
            selection = resolve_indices(self._device_indices, count)
        else:
            selection = resolve_visible(spec, uuids)
        self._targets, self._note = self._bind(selection, handles)
        if not self._targets:
            self._cause = self._note or "NVML sees no devices"

    def _bind(
        self, selection: Selection, handles: list[object | None]
    ) -> tuple[tuple[_Target, ...], str | None]:
        """Turn selected indices and MIG UUIDs into handles, naming those NVML will not give."""
        targets: list[_Target] = []
        notes = [] if selection.note is None else [selection.note]
        for target in selection.targets:
            index: int | None
            if isinstance(target, int):
                handle, index = handles[target], target
            else:
                handle = self._field(self._nvml.handle_by_uuid, target)
                index = None if handle is None else self._field(self._nvml.index, handle)
            if handle is None:
                notes.append(f"NVML gives no handle for device {target}, so it is not shown")
                continue
            uuid = self._field(self._nvml.uuid, handle)
            name = self._field(self._nvml.name, handle)
            targets.append(_Target(handle=handle, index=index, uuid=uuid, name=name))
        return tuple(targets), "; ".join(notes) or None

    def _read_device(self, target: _Target) -> GpuDevice:
        """Read one device's changing fields."""
        nvml, handle = self._nvml, target.handle
        utilization = self._field(nvml.utilization_pct, handle)
        memory = self._field(nvml.memory_bytes, handle)
        power_draw_mw = self._field(nvml.power_draw_mw, handle)
        power_limit_mw = self._field(nvml.power_limit_mw, handle)
        throttle_mask = self._field(nvml.throttle_reasons_mask, handle)
        return GpuDevice(
            index=target.index,
            uuid=target.uuid,
            name=target.name,
            gpu_util_pct=None if utilization is None else utilization[0],
            mem_util_pct=None if utilization is None else utilization[1],
            memory_used_bytes=None if memory is None else memory[0],
            memory_total_bytes=None if memory is None else memory[1],
            power_draw_w=None if power_draw_mw is None else power_draw_mw / 1000.0,
            power_limit_w=None if power_limit_mw is None else power_limit_mw / 1000.0,
            sm_clock_mhz=self._field(nvml.sm_clock_mhz, handle),
            temperature_c=self._field(nvml.temperature_c, handle),
            throttle_reasons=None
            if throttle_mask is None
            else decode_throttle_reasons(throttle_mask),
            processes=self._read_processes(handle),
        )

    def _read_processes(self, handle: object) -> tuple[GpuProcess, ...] | None:
        """List compute then graphics processes once each; None when NVML lists neither."""
        compute = self._field(self._nvml.compute_processes, handle)
        graphics = self._field(self._nvml.graphics_processes, handle)
        if compute is None and graphics is None:
            return None
        seen: dict[int, NvmlProcess] = {}
        for proc in (compute or []) + (graphics or []):
            seen.setdefault(proc.pid, proc)
        return tuple(
            GpuProcess(
                pid=proc.pid,
                name=self._field(self._nvml.process_name, proc.pid),
                used_memory_bytes=proc.used_memory_bytes,
            )
            for proc in seen.values()
        )


def _device_to_json(device: GpuDevice) -> dict[str, Any]:
    processes = None
    if device.processes is not None:
        processes = [
            {"pid": p.pid, "name": p.name, "used_memory_bytes": p.used_memory_bytes}
            for p in device.processes
        ]
    return {
        "index": device.index,
        "uuid": device.uuid,
        "name": device.name,
        "gpu_util_pct": device.gpu_util_pct,
        "mem_util_pct": device.mem_util_pct,
        "memory_used_bytes": device.memory_used_bytes,
        "memory_total_bytes": device.memory_total_bytes,
        "power_draw_w": device.power_draw_w,
        "power_limit_w": device.power_limit_w,
        "sm_clock_mhz": device.sm_clock_mhz,
        "temperature_c": device.temperature_c,
        "throttle_reasons": None
        if device.throttle_reasons is None
        else list(device.throttle_reasons),
        "processes": processes,
    }


def gpu_snapshot_to_json(snapshot: GpuSnapshot) -> dict[str, Any]:
    """Give a snapshot as JSON-ready data with unit-named keys; missing values are null."""
    if not snapshot.visible:
        return {
            "taken_at_s": snapshot.taken_at_s,
            "visible": False,
            "reason": snapshot.unavailable_reason,
        }
    return {
        "taken_at_s": snapshot.taken_at_s,
        "visible": True,
        "driver_version": snapshot.driver_version,
        "selection_note": snapshot.selection_note,
        "devices": [_device_to_json(device) for device in snapshot.devices],
    }


def _device_lines(device: GpuDevice) -> list[str]:
    label = f"GPU {device.index}" if device.index is not None else (device.uuid or "GPU ?")
    head = (
        f"  {label} {device.name or fmt.NA}: util {fmt.fixed(device.gpu_util_pct, '', '%')}"
        f"  mem-util {fmt.fixed(device.mem_util_pct, '', '%')}"
        f"  mem {fmt.gib(device.memory_used_bytes, '')}/{fmt.gib(device.memory_total_bytes, '')} GiB"
        f"  power {fmt.fixed(device.power_draw_w, '.0f')}/{fmt.fixed(device.power_limit_w, '.0f')} W"
        f"  SM {fmt.fixed(device.sm_clock_mhz, '', ' MHz')}  temp {fmt.fixed(device.temperature_c, '', ' C')}"
    )
    if device.throttle_reasons is None:
        throttle = fmt.NA
    else:
        throttle = ", ".join(device.throttle_reasons) or "none"
    lines = [head, f"    throttle: {throttle}"]
    if device.processes is None:
        lines.append("    processes: N/A")
    elif not device.processes:
        lines.append("    processes: none")
    for proc in device.processes or ():
        memory = fmt.gib(proc.used_memory_bytes, "")
        lines.append(f"    pid {proc.pid} {proc.name or fmt.NA}: {memory} GiB")
    return lines


def format_gpu_text(snapshot: GpuSnapshot) -> str:
    """Render a snapshot as a few plain-text lines for the headless `slotop snapshot`."""
    if not snapshot.visible:
        return f"GPU: none visible ({snapshot.unavailable_cause})"
    driver = f", driver {snapshot.driver_version}" if snapshot.driver_version else ""
    lines = [f"GPU: {len(snapshot.devices)} visible{driver}"]
    if snapshot.selection_note:
        lines.append(f"  note: {snapshot.selection_note}")
    for device in snapshot.devices:
        lines.extend(_device_lines(device))
    return "\n".join(lines)
