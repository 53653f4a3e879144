"""The dashboard's toasts keep a setting's `[section]`, which markup would take for a tag."""

from __future__ import annotations

from typing import Any

import pytest
from textual.widgets._toast import Toast

from slotop.config import Settings
from slotop.tui.app import SlotopApp
from tests.support.pilot import wait_until

pytestmark = pytest.mark.anyio


async def _toasts(pilot: Any, app: SlotopApp) -> str:
    """The text of the toasts on screen, once one shows (a busy machine mounts it later than
    one pause)."""
    await wait_until(pilot, lambda: bool(app.screen.query(Toast)), 10.0, what="no toast showed")
    return " ".join(str(toast.render()) for toast in app.screen.query(Toast))


async def test_a_toast_naming_a_setting_keeps_its_section() -> None:
    app = SlotopApp(Settings(), clock=lambda: 1000.0)
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        app.notify("set [fleet] direct_from_instance = true, or [replica] url to it")
        shown = await _toasts(pilot, app)
        assert "set [fleet] direct_from_instance = true, or [replica] url to it" in shown, shown


@pytest.mark.parametrize("key", ["l", "s", "t"])
async def test_the_load_keys_without_a_probe_say_why_and_what_to_set(key: str) -> None:
    app = SlotopApp(Settings(), clock=lambda: 1000.0)  # no probe: as the fleet's drill-in
    async with app.run_test(size=(160, 50), notifications=True) as pilot:
        await pilot.press(key)
        shown = await _toasts(pilot, app)
        assert "knows no URL of this replica's own" in shown, shown
        assert "set [fleet] direct_from_instance = true" in shown, shown
