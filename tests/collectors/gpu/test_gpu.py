"""GpuReader against a fake NVML: fields, refusals, init failures, device selection, one init."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotop.collectors.errors import CollectorError
from slotop.collectors.gpu.nvml import (
    NVML_ERROR_DRIVER_NOT_LOADED,
    NVML_ERROR_GPU_IS_LOST,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    NVML_ERROR_LIBRARY_NOT_FOUND,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_UNINITIALIZED,
    PYNVML_NOT_INSTALLED,
    NvmlApi,
    NvmlProcess,
)
from slotop.collectors.gpu.reader import GpuDevice, GpuProcess, GpuReader
from tests.support.fake_nvml import GIB, FakeGpu, FakeNvml


def _three_gpus() -> list[FakeGpu]:
    return [FakeGpu("GPU-aaaa-0000"), FakeGpu("GPU-aaab-1111"), FakeGpu("GPU-cccc-2222")]


def _reader(
    nvml: NvmlApi, env: str | None = None, device_indices: tuple[int, ...] | None = None
) -> GpuReader:
    environ = {} if env is None else {"CUDA_VISIBLE_DEVICES": env}
    return GpuReader(nvml, device_indices=device_indices, environ=environ, clock=lambda: 100.0)


@pytest.fixture
def full_gpu() -> FakeGpu:
    return FakeGpu(
        "GPU-aaaa-0000",
        throttle_mask=0x4 | 0x40,
        compute=[NvmlProcess(pid=4242, used_memory_bytes=118 * GIB)],
        graphics=[NvmlProcess(pid=4242, used_memory_bytes=1), NvmlProcess(7, None)],
    )


def test_every_field_is_read_and_converted(full_gpu: FakeGpu) -> None:
    nvml = FakeNvml([full_gpu], process_names={4242: "python3"})
    snapshot = _reader(nvml).read()
    assert snapshot.visible and snapshot.unavailable_reason is None
    assert snapshot.taken_at_s == 100.0
    assert snapshot.driver_version == "550.54.15"
    assert snapshot.selection_note is None
    assert snapshot.devices == (
        GpuDevice(
            index=0,
            uuid="GPU-aaaa-0000",
            name="NVIDIA H200",
            gpu_util_pct=87,
            mem_util_pct=45,
            memory_used_bytes=120 * GIB,
            memory_total_bytes=141 * GIB,
            power_draw_w=512.5,
            power_limit_w=700.0,
            sm_clock_mhz=1980,
            temperature_c=61,
            throttle_reasons=("sw_power_cap", "hw_thermal_slowdown"),
            processes=(
                GpuProcess(pid=4242, name="python3", used_memory_bytes=118 * GIB),
                GpuProcess(pid=7, name=None, used_memory_bytes=None),
            ),
        ),
    )


@pytest.mark.parametrize(
    ("call", "fields"),
    [
        ("utilization_pct", ("gpu_util_pct", "mem_util_pct")),
        ("memory_bytes", ("memory_used_bytes", "memory_total_bytes")),
        ("power_draw_mw", ("power_draw_w",)),
        ("power_limit_mw", ("power_limit_w",)),
        ("sm_clock_mhz", ("sm_clock_mhz",)),
        ("temperature_c", ("temperature_c",)),
        ("throttle_reasons_mask", ("throttle_reasons",)),
        ("name", ("name",)),
        ("uuid", ("uuid",)),
    ],
)
def test_a_refused_call_leaves_only_its_fields_none(call: str, fields: tuple[str, ...]) -> None:
    full = _reader(FakeNvml([FakeGpu("GPU-aaaa-0000")])).read().devices[0]
    nvml = FakeNvml([FakeGpu("GPU-aaaa-0000", refuses=frozenset({call}))])
    device = _reader(nvml).read().devices[0]
    for name in GpuDevice.__slots__:
        if name in fields:
            assert getattr(device, name) is None, name
        else:
            assert getattr(device, name) == getattr(full, name), name


def test_processes_are_none_only_when_neither_list_is_known() -> None:
    both = frozenset({"compute_processes", "graphics_processes"})
    refused = _reader(FakeNvml([FakeGpu("GPU-a", refuses=both)])).read().devices[0]
    only_compute = FakeGpu(
        "GPU-a", refuses=frozenset({"graphics_processes"}), compute=[NvmlProcess(9, 5)]
    )
    partial = _reader(FakeNvml([only_compute])).read().devices[0]
    empty = _reader(FakeNvml([FakeGpu("GPU-a")])).read().devices[0]
    assert refused.processes is None
    assert partial.processes == (GpuProcess(pid=9, name=None, used_memory_bytes=5),)
    assert empty.processes == ()


def test_a_lost_gpu_reads_as_none_without_raising() -> None:
    gpu = FakeGpu("GPU-a")
    nvml = FakeNvml([gpu])
    reader = _reader(nvml)
    assert reader.read().devices[0].gpu_util_pct == 87
    gpu.refuses = frozenset({"utilization_pct", "memory_bytes", "temperature_c"})
    device = reader.read().devices[0]
    assert (device.gpu_util_pct, device.memory_total_bytes, device.temperature_c) == (None,) * 3
    assert device.sm_clock_mhz == 1980


@pytest.mark.parametrize(
    ("code", "cause"),
    [
        (NVML_ERROR_LIBRARY_NOT_FOUND, "NVML library not found"),
        (NVML_ERROR_DRIVER_NOT_LOADED, "driver not loaded"),
        (PYNVML_NOT_INSTALLED, "nvidia-ml-py is not installed"),
        (NVML_ERROR_NO_PERMISSION, "no permission to open the NVIDIA devices"),
        (
            NVML_ERROR_LIB_RM_VERSION_MISMATCH,
            "NVML library and kernel driver versions differ; reload the driver or reboot",
        ),
        (NVML_ERROR_GPU_IS_LOST, "NVML init failed: fake init error 15"),
    ],
)
def test_init_failure_is_a_state_tried_once(code: int, cause: str) -> None:
    nvml = FakeNvml(_three_gpus(), init_error=code)
    reader = _reader(nvml)
    snapshots = [reader.read() for _ in range(3)]
    reader.close()
    for snapshot in snapshots:
        assert not snapshot.visible and snapshot.devices == ()
        assert snapshot.unavailable_cause == cause
        assert snapshot.unavailable_reason == f"no NVIDIA GPU visible ({cause})"
    assert nvml.calls == {"init": 1}


def test_no_devices_and_uncountable_devices_are_states() -> None:
    empty = _reader(FakeNvml([])).read()
    uncountable = _reader(FakeNvml(_three_gpus(), count_error=NVML_ERROR_GPU_IS_LOST)).read()
    assert empty.unavailable_reason == "no NVIDIA GPU visible (NVML sees no devices)"
    assert uncountable.unavailable_cause == "NVML could not count devices: fake count error"


def test_one_init_across_many_reads_and_one_shutdown() -> None:
    nvml = FakeNvml(_three_gpus())
    reader = _reader(nvml)
    assert nvml.calls == {}, "nothing happens before the first read"
    for _ in range(5):
        assert len(reader.read().devices) == 3
    reader.close()
    reader.close()
    assert nvml.calls["init"] == 1
    assert nvml.calls["shutdown"] == 1
    assert nvml.calls["device_count"] == 1
    assert nvml.calls["handle_by_index"] == 3
    assert nvml.calls["name"] == 3
    assert nvml.calls["utilization_pct"] == 15


def test_read_after_close_raises_and_context_manager_closes() -> None:
    nvml = FakeNvml(_three_gpus())
    with _reader(nvml) as reader:
        reader.read()
    assert nvml.calls["shutdown"] == 1
    with pytest.raises(CollectorError, match="after close"):
        reader.read()


def test_close_before_any_read_and_failing_shutdown_do_not_raise() -> None:
    never_read = FakeNvml(_three_gpus())
    _reader(never_read).close()
    failing = FakeNvml(_three_gpus(), shutdown_error=NVML_ERROR_UNINITIALIZED)
    reader = _reader(failing)
    reader.read()
    reader.close()
    assert never_read.calls == {}
    assert failing.calls["shutdown"] == 1


def test_each_read_takes_the_clock() -> None:
    times: Iterator[float] = iter([5.0, 6.5])
    reader = GpuReader(FakeNvml(_three_gpus()), environ={}, clock=lambda: next(times))
    assert [reader.read().taken_at_s, reader.read().taken_at_s] == [5.0, 6.5]


def test_missing_driver_version_still_reads_devices() -> None:
    snapshot = _reader(FakeNvml(_three_gpus(), driver=None)).read()
    assert snapshot.visible and snapshot.driver_version is None and len(snapshot.devices) == 3


@pytest.mark.parametrize(
    ("env", "indices", "note_has"),
    [
        (None, [0, 1, 2], None),
        ("2,0", [2, 0], None),
        (" 1 , 2 ", [1, 2], None),
        ("GPU-cccc", [2], None),
        ("0,7,1", [0], "'7'"),
        ("1,1", [1], "repeats"),
        ("0,-1,2", [0], "'-1'"),
    ],
)
def test_cuda_visible_devices_selects_in_cuda_order(
    env: str | None, indices: list[int], note_has: str | None
) -> None:
    snapshot = _reader(FakeNvml(_three_gpus()), env).read()
    assert [device.index for device in snapshot.devices] == indices
    if note_has is None:
        assert snapshot.selection_note is None
    else:
        assert snapshot.selection_note is not None and note_has in snapshot.selection_note


@pytest.mark.parametrize(
    ("env", "cause_has", "inits"),
    [
        ("", "CUDA_VISIBLE_DEVICES is empty", 0),
        ("-1", "entry '-1' is not a device index", 0),
        ("NoDevFiles", "entry 'NoDevFiles'", 0),
        ("MIG-GPU-aaaa-0000/1/0", "legacy", 0),
        ("5", "entry '5' is not a device index (NVML sees 3)", 1),
        ("GPU-aaa", "matches 2 devices", 1),
        ("MIG-absent", "NVML gives no handle for device MIG-absent", 1),
    ],
)
def test_cuda_visible_devices_hiding_everything_is_a_state(
    env: str, cause_has: str, inits: int
) -> None:
    nvml = FakeNvml(_three_gpus())
    snapshot = _reader(nvml, env).read()
    assert not snapshot.visible and snapshot.devices == ()
    assert snapshot.unavailable_cause is not None and cause_has in snapshot.unavailable_cause
    assert nvml.calls.get("init", 0) == inits


def test_mig_uuid_reads_the_instance_with_what_it_supports() -> None:
    mig = FakeGpu(
        "MIG-1234", name="NVIDIA H200 MIG 1g.18gb", refuses=frozenset({"index", "utilization_pct"})
    )
    nvml = FakeNvml(_three_gpus(), migs={"MIG-1234": mig})
    snapshot = _reader(nvml, "MIG-1234").read()
    (device,) = snapshot.devices
    assert (device.index, device.uuid, device.name) == (None, "MIG-1234", mig.name)
    assert device.gpu_util_pct is None and device.memory_total_bytes == 141 * GIB


def test_a_device_without_a_handle_is_skipped_and_named() -> None:
    gpus = _three_gpus()
    gpus[1].refuses = frozenset({"handle"})
    snapshot = _reader(FakeNvml(gpus)).read()
    assert [device.index for device in snapshot.devices] == [0, 2]
    assert snapshot.selection_note == "NVML gives no handle for device 1, so it is not shown"


@pytest.mark.parametrize(
    ("indices", "env", "selected", "note"),
    [
        ((2,), "0", [2], None),
        ((1, 0), None, [1, 0], None),
        ((0, 9), "", [0], "GPU indices from settings not found (NVML sees 3): 9"),
        ((), "1", [1], None),
        (None, "2", [2], None),
    ],
)
def test_explicit_indices_win_over_cuda_visible_devices(
    indices: tuple[int, ...] | None, env: str | None, selected: list[int], note: str | None
) -> None:
    snapshot = _reader(FakeNvml(_three_gpus()), env, device_indices=indices).read()
    assert [device.index for device in snapshot.devices] == selected
    assert snapshot.selection_note == note


def test_explicit_indices_all_missing_is_a_state() -> None:
    snapshot = _reader(FakeNvml(_three_gpus()), device_indices=(4,)).read()
    assert snapshot.unavailable_cause == "GPU indices from settings not found (NVML sees 3): 4"
