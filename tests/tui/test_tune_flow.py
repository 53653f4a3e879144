"""The t key through Pilot: refused without a replica to restart; on the simulated replica it
shows the plan, tunes in a worker with its progress and decisions on screen, and puts the
replica back on its own dials (tests/support/tune_sim.py's replica, one candidate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.actions.probe_control import ProbeControl, load_shape_from_settings
from slotop.actions.replica.spec import launch_spec_from_settings
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.actions.tune.resume import recorded_tune
from slotop.actions.wiring.restart import restart_target
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import Settings, load_settings
from slotop.tui.app import SlotopApp
from slotop.tui.run import build_app
from slotop.tui.screens.confirm import ConfirmScreen
from tests.support.fake_probe import FakeProbe
from tests.support.tune_sim import ORIGINAL, launched, tune_sim_config

pytestmark = pytest.mark.anyio


async def test_the_tune_key_without_a_replica_to_restart_says_why() -> None:
    notes: list[str] = []
    settings = Settings()
    control = ProbeControl(
        ProbeTarget(base_url=settings.replica.url),
        load_shape_from_settings(settings.load),
        False,
        start_probe=lambda *_: FakeProbe(1),
    )
    app = SlotopApp(
        settings,
        probe_control=control,
        restart_access=lambda: "no replica that slotop started runs for it",
    )

    def notify(message: str, **_: object) -> None:
        notes.append(message)

    app.notify = notify  # type: ignore[method-assign,assignment]
    async with app.run_test() as pilot:
        await pilot.press("t")
        assert not isinstance(app.screen, ConfirmScreen)
    assert notes == ["unavailable: no replica that slotop started runs for it"]


@pytest.mark.slow
async def test_the_tune_key_plans_tunes_and_puts_the_replica_back(
    no_strays: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    config = tune_sim_config(tmp_path, extra="[tune]\nmax_candidates = 1\n")
    with launched(config):
        settings = load_settings(config)
        record = tmp_path / "dashboard.jsonl"
        recorder = start_recording(command="attach", settings=settings, path=record)
        app = build_app(settings, recorder=recorder)
        warnings: list[str] = []

        def notify(message: str, *, severity: str = "information", **_: object) -> None:
            if severity == "warning":
                warnings.append(message)

        app.notify = notify  # type: ignore[method-assign,assignment]
        try:
            async with app.run_test(size=(160, 50)) as pilot:
                await pilot.press("t")
                assert isinstance(app.screen, ConfirmScreen)
                summary = str(app.screen.query_one("#confirm-summary").render())
                assert f"Tune {settings.replica.url}, now --kv-cache-dtype=auto" in summary
                assert "up to 1 candidates" in summary and "t again stops it" in summary
                await pilot.press("y")
                await pilot.pause()
                assert app.inputs.sweeping
                await pilot.press("s", "k", "l")  # the tune drives the probe and the restarts
                assert not isinstance(app.screen, ConfirmScreen)
                assert warnings == ["a tune is running: t stops it"] * 3
                await app.workers.wait_for_complete()
                await pilot.pause()
                assert not app.inputs.sweeping and app.inputs.sweep_result is not None
                tune_notes = [e.text for e in app.inputs.events if e.kind == "tune"]
                assert tune_notes[0] == "tune started from --kv-cache-dtype auto --max-num-seqs 6"
                assert any(text.startswith("decision after #0") for text in tune_notes)
                assert any(text.startswith("tune chose ") for text in tune_notes)
                assert "1 candidate tried" in tune_notes[-1]
                restarts = [e.text for e in app.inputs.events if e.kind == "restart"]
                assert sum(text.startswith("verify: dials match") for text in restarts) == 2
        finally:
            app.shutdown()
            recorder.close()
        _, dials, _ = restart_target(launch_spec_from_settings(settings))
        assert dials == ORIGINAL
    tune = recorded_tune(read_recording(record))
    assert tune is not None and tune.result is not None
    assert [t.dials.kv_cache_dtype for t in tune.state.trials] == ["auto", "fp8"]
    assert tune.result["ended_dials"] == ORIGINAL.to_json() and tune.result["verified"]
