"""The GPU pane and the GPU litmus on the simulated replica's modelled GPUs: marked SIMULATED, and
shown only where NVML reads no real GPU."""

from __future__ import annotations

import dataclasses

import pytest

from slotop.actions.slo import Verdict
from slotop.collectors.gpu.nvml import NVML_ERROR_LIBRARY_NOT_FOUND
from slotop.collectors.gpu.reader import GpuDevice, GpuReader, GpuSnapshot
from slotop.config import Settings
from slotop.tui.app import SlotopApp
from slotop.tui.messages import GpuCollected, LatencyTrend, SnapshotCollected
from slotop.tui.panes.checklist import LitmusPane
from slotop.tui.panes.gpu import GpuPane, fit_name
from slotop.tui.views.dashboard import gpu_view
from slotop.tui.views.inputs import Inputs
from slotop.tui.views.verdict import litmus
from tests.support.fake_nvml import FakeGpu, FakeNvml
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh

pytestmark = pytest.mark.anyio

SIMULATED_H100 = GpuDevice(
    index=0,
    uuid=None,
    name="NVIDIA H100 80GB HBM3",
    gpu_util_pct=85,
    mem_util_pct=None,
    memory_used_bytes=76_526_028_390,  # 71.27 GiB
    memory_total_bytes=85_030_305_710,  # 79.19 GiB
    power_draw_w=431.5,
    power_limit_w=700.0,
    sm_clock_mhz=None,
    temperature_c=None,
    throttle_reasons=None,
    processes=None,
)
SIMULATED_LINE = "SIMULATED GPU0 85% util  71.3 GiB/79.2 GiB  432/700 W  NVIDIA H100 80GB HBM3"

REAL = capture_snapshot()
DEMO = dataclasses.replace(
    REAL,
    simulated_gpu=GpuSnapshot(
        FROZEN_NOW_S, (SIMULATED_H100, dataclasses.replace(SIMULATED_H100, index=1))
    ),
)


def _blind_nvml() -> GpuSnapshot:
    """What NVML says on a box without a GPU driver: the reader's own words."""
    return GpuReader(FakeNvml([], init_error=NVML_ERROR_LIBRARY_NOT_FOUND), environ={}).read()


def _real_nvml() -> GpuSnapshot:
    """One real (fake-NVML) H200 at 87 % utilisation, 120 of 141 GiB, 512.5 W."""
    return GpuReader(FakeNvml([FakeGpu("GPU-aaaa-0000")]), environ={}).read()


def _inputs(snapshot: object, gpu: GpuSnapshot | None) -> Inputs:
    return Inputs(
        settings=Settings(),
        now_s=FROZEN_NOW_S,
        started_s=FROZEN_NOW_S,
        poll=fresh(snapshot),  # type: ignore[arg-type]
        last_poll_at_s=FROZEN_NOW_S,
        gpu=gpu,
    )


def test_the_view_shows_the_simulated_gpus_marked_where_nvml_sees_none() -> None:
    view = gpu_view(_inputs(DEMO, _blind_nvml()))
    assert view.simulated and view.available
    assert view.lines == (SIMULATED_LINE, SIMULATED_LINE.replace("GPU0", "GPU1"))
    assert gpu_view(_inputs(DEMO, None)).simulated  # before NVML's first read too


def test_a_real_replica_without_nvml_says_why_no_gpu_is_shown() -> None:
    view = gpu_view(_inputs(REAL, _blind_nvml()))
    assert not view.simulated and not view.available
    assert view.lines == ("no NVIDIA GPU visible (NVML library not found)",)


def test_a_real_nvml_reading_wins_over_the_simulated_one() -> None:
    view = gpu_view(_inputs(DEMO, _real_nvml()))
    assert not view.simulated
    assert len(view.lines) == 1 and view.lines[0].startswith("GPU0 87% util  120.0 GiB/141.0 GiB")
    assert "SIMULATED" not in view.lines[0]


def test_the_gpu_litmus_judged_on_simulated_gpus_says_so() -> None:
    def gpu_item(gpu: GpuSnapshot, simulated: bool) -> tuple[bool, str, bool]:
        items = litmus(
            ttft_percentile=99.0,
            itl_percentile=99.0,
            slo_source="test",
            snapshot=DEMO,
            gpu=gpu,
            gpu_simulated=simulated,
            slo_verdict=Verdict.PASS,
            curve=(),
            ttft_target_s=0.5,
            itl_target_s=0.05,
        )
        item = items[2]
        assert item.label == "GPU > 80% with p99 in budget"
        return item.ticked, item.detail, item.simulated

    assert DEMO.simulated_gpu is not None
    simulated = gpu_item(DEMO.simulated_gpu, True)
    assert simulated == (True, "SIMULATED GPU 85% min, SLO pass", True)
    assert gpu_item(_real_nvml(), False) == (True, "GPU 87% min, SLO pass", False)


async def test_the_dashboard_marks_simulated_gpus_and_lets_a_real_reading_replace_them() -> None:
    app = SlotopApp(Settings(), clock=lambda: FROZEN_NOW_S)
    async with app.run_test(size=(160, 50)) as pilot:
        app.post_message(GpuCollected(_blind_nvml()))
        app.post_message(SnapshotCollected(fresh(DEMO), LatencyTrend()))
        await pilot.pause()
        pane = app.query_one(GpuPane)
        shown = pane.render()
        assert shown.plain.splitlines()[0] == SIMULATED_LINE
        marked = [span for span in shown.spans if shown.plain[span.start : span.end] == "SIMULATED"]
        assert len(marked) == 2 and all(str(span.style) == "bold yellow" for span in marked)
        checklist = app.query_one(LitmusPane).render().plain
        assert "GPU > 80% with p99 in budget: SIMULATED GPU 85% min" in checklist

        app.post_message(GpuCollected(_real_nvml()))
        await pilot.pause()
        shown = pane.render()
        assert "SIMULATED" not in shown.plain
        assert shown.plain.startswith("GPU0 87% util")
        checklist = app.query_one(LitmusPane).render().plain
        assert "GPU > 80% with p99 in budget: GPU 87% min" in checklist
        assert "SIMULATED" not in checklist


@pytest.mark.parametrize(
    ("size", "inside", "shown"),
    [
        # half of 160 columns, less the border and padding: 76; the line is 77, so "M3" goes
        ((160, 50), 76, "NVIDIA H100 80GB HB…"),
        # all of 80, less the scroll bar too: 74
        ((80, 24), 74, "NVIDIA H100 80GB…"),
    ],
)
async def test_a_long_gpu_name_is_shortened_at_its_end_so_the_line_stays_whole(
    size: tuple[int, int], inside: int, shown: str
) -> None:
    busy = dataclasses.replace(SIMULATED_H100, gpu_util_pct=100)
    demo = dataclasses.replace(REAL, simulated_gpu=GpuSnapshot(FROZEN_NOW_S, (busy,)))
    app = SlotopApp(Settings(), clock=lambda: FROZEN_NOW_S)
    async with app.run_test(size=size) as pilot:
        app.post_message(GpuCollected(_blind_nvml()))
        app.post_message(SnapshotCollected(fresh(demo), LatencyTrend()))
        await pilot.pause()
        pane = app.query_one(GpuPane)
        assert pane.content_size.width == inside
        numbers = "SIMULATED GPU0 100% util  71.3 GiB/79.2 GiB  432/700 W  "
        assert pane.render().plain == numbers + shown
        assert pane.outer_size.height == 3  # one line between the borders: nothing wrapped


def test_a_name_with_no_room_left_is_left_off_and_a_short_line_kept() -> None:
    numbers = "SIMULATED GPU0 100% util  71.3 GiB/79.2 GiB  432/700 W"
    row = f"{numbers}  NVIDIA H100 80GB HBM3"
    assert fit_name(row, "NVIDIA H100 80GB HBM3", 58) == numbers  # 2 columns: no room for a name
    assert fit_name(row, "NVIDIA H100 80GB HBM3", 59) == f"{numbers}  NV…"
    assert fit_name(row, "NVIDIA H100 80GB HBM3", 200) == row
    assert fit_name("no GPU visible", "", 5) == "no GPU visible"  # a reason wraps, never cut
