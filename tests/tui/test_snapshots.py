"""SVG snapshots of the whole screen at 80×24 and 160×50, fed frozen data under a frozen clock.

Each runs in both drawing modes (tui/textual_internals.py's tricks on, and Textual's own way)
against the one SVG: the screen must not differ between them. Update the baselines with `pytest tests/tui/test_snapshots.py --snapshot-update` after a change
meant to alter the picture, and look at the SVGs before committing them.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.location import PyTestLocation

from slotop.actions.experiment.model import Configuration, ConfigurationCurve, CurvePoint
from slotop.actions.probe_control import ProbeControl, load_shape_from_settings
from slotop.collectors.gpu.reader import GpuDevice, GpuSnapshot
from slotop.collectors.probe.records import ProbeStatus
from slotop.collectors.probe.stats import probe_stats
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import Settings
from slotop.slo import GoodputTargets
from slotop.tui.app import SlotopApp
from slotop.tui.messages import (
    CurveUpdated,
    GpuCollected,
    LatencyTrend,
    ProbeUpdated,
    ProbeView,
    SnapshotCollected,
    TimelineEvent,
    TimelineNoted,
)
from tests.support.change_table import DEMO_BEFORE_AFTER
from tests.support.fake_probe import FakeProbe, probe_record
from tests.support.tui_fakes import FROZEN_NOW_S, capture_snapshot, fresh
from tests.tui.conftest import RENDER_MODES

pytestmark = pytest.mark.usefixtures("render_mode")


def _without_render_mode(name: str) -> str:
    """A test's name less its render mode: `test_x[plain-size0]` → `test_x[size0]`."""
    base, _, ids = name.partition("[")
    kept = [part for part in ids.removesuffix("]").split("-") if part and part not in RENDER_MODES]
    return f"{base}[{'-'.join(kept)}]" if kept else base


class _NamedWithoutRenderMode:
    """A test item as syrupy reads it to name its snapshot, without the render mode."""

    def __init__(self, item: pytest.Item) -> None:
        self._item = item
        self.name = _without_render_mode(item.name)
        path, _, _ = item.nodeid.rpartition("::")
        self.nodeid = f"{path}::{self.name}"

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._item, attribute)


@pytest.fixture
def snapshot(snapshot: SnapshotAssertion, request: pytest.FixtureRequest) -> SnapshotAssertion:
    """syrupy's snapshot, named as if the test had no render mode: both modes hold to one SVG."""
    location = PyTestLocation(_NamedWithoutRenderMode(request.node))  # type: ignore[arg-type]
    return dataclasses.replace(snapshot, test_location=location)


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Timeline stamps are local times; pin the zone so the picture does not move."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _trend() -> LatencyTrend:
    times = tuple(FROZEN_NOW_S - 60 + i for i in range(60))
    wave = [0.5 + 0.5 * ((i * 7) % 10) / 10 for i in range(60)]
    return LatencyTrend(
        times_s=times,
        ttft_p50_s=tuple(0.05 * w for w in wave),
        ttft_p90_s=tuple(0.2 * w for w in wave),
        ttft_p99_s=tuple(0.4 * w + (0.3 if i > 50 else 0) for i, w in enumerate(wave)),
        itl_p50_s=tuple(0.01 * w for w in wave),
        itl_p90_s=tuple(0.02 * w for w in wave),
        itl_p99_s=(None,) * 5 + tuple(0.04 * w for w in wave[5:]),
    )


def _probe() -> ProbeView:
    records = [probe_record(3, i, 0.05 + i * 0.001, (0.01, 0.012, 0.02)) for i in range(40)]
    stats = probe_stats(records, 0.0, 41.0, (50.0, 90.0, 99.0), GoodputTargets(0.5, 0.05))
    status = ProbeStatus(FROZEN_NOW_S, 3, "closed", 4, None, 4, 44, 40, 0)
    return ProbeView(True, status, stats, stats, (("timeout", 1),))


def _gpu() -> GpuSnapshot:
    device = GpuDevice(
        0,
        "GPU-0",
        "NVIDIA H100 80GB HBM3",
        87,
        41,
        70 * 2**30,
        80 * 2**30,
        512.0,
        700.0,
        1980,
        61,
        (),
        None,
    )
    return GpuSnapshot(FROZEN_NOW_S, (device,), driver_version="550.54")


async def _feed(pilot: Any) -> None:
    app = pilot.app
    app.post_message(SnapshotCollected(fresh(capture_snapshot()), _trend()))
    app.post_message(GpuCollected(_gpu()))
    app.post_message(ProbeUpdated(_probe()))
    app.post_message(
        CurveUpdated(
            ConfigurationCurve(
                Configuration(2, (("--kv-cache-dtype", "fp8"),), FROZEN_NOW_S - 20, "#2 kv fp8"),
                (
                    CurvePoint(1, 0.05, 0.010, 40, 95.0),
                    CurvePoint(2, 0.07, 0.012, 40, 180.0),
                    CurvePoint(4, 0.12, 0.016, 40, 330.0),
                    CurvePoint(8, 0.41, 0.031, 40, 560.0),
                    CurvePoint(16, 0.95, 0.052, 40, 640.0),
                ),
            ),
            ConfigurationCurve(
                Configuration(1, (("--kv-cache-dtype", "auto"),), FROZEN_NOW_S - 60, "#1 kv auto"),
                (
                    CurvePoint(1, 0.06, 0.011, 40, 90.0),
                    CurvePoint(2, 0.08, 0.014, 40, 170.0),
                    CurvePoint(4, 0.21, 0.02, 40, 300.0),
                    CurvePoint(8, 0.74, 0.045, 40, 420.0),
                ),
            ),
        )
    )
    for offset, kind, text in (
        (-50, "load", "Keep 1 requests in flight against http://127.0.0.1:8000/v1/completions."),
        (-30, "load", "Concurrency → 2: 1 more requests go out at once."),
        (-12, "down", "replica not answering: connection refused"),
        (-9, "up", "replica answering again"),
    ):
        app.post_message(TimelineNoted(TimelineEvent(FROZEN_NOW_S + offset, kind, text)))
    await pilot.pause()


def _app() -> SlotopApp:
    settings = Settings()
    control = ProbeControl(
        ProbeTarget(base_url=settings.replica.url),
        load_shape_from_settings(settings.load),
        allow_remote_load=False,
        start_probe=lambda *_: FakeProbe(1, closed_loop=True),
    )
    return SlotopApp(
        settings, probe_control=control, clock=lambda: FROZEN_NOW_S + 42, simulated=True
    )


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_the_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(_app(), terminal_size=size, run_before=_feed)


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_the_dashboard_after_a_restart(snap_compare: Any, size: tuple[int, int]) -> None:
    """The before/after panel first: every pane still on screen at 160×50, its headline at 80×24."""

    async def restarted(pilot: Any) -> None:
        await _feed(pilot)
        pilot.app.update_inputs(before_after=DEMO_BEFORE_AFTER)
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=size, run_before=restarted)


def test_the_probe_confirmation(snap_compare: Any) -> None:
    assert snap_compare(_app(), terminal_size=(80, 24), press=["l"])


def test_a_stale_replica_before_any_data(snap_compare: Any) -> None:
    async def failed(pilot: Any) -> None:
        from tests.support.tui_fakes import stale

        pilot.app.post_message(SnapshotCollected(stale(None, "connection refused"), LatencyTrend()))
        await pilot.pause()

    assert snap_compare(_app(), terminal_size=(80, 24), run_before=failed)
