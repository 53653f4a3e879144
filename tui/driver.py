"""The terminal drivers the dashboard runs with: a quiet one in a terminal, a served one in a browser.

In a terminal, where Textual would take its Linux driver, the dashboard takes
`QuietInputDriver` (tui/textual_internals.py), whose input thread sleeps while no key comes, unless
its check at import failed or SLOTOP_PLAIN_RENDER=1, when it keeps Textual's. Headless runs,
inline runs and other platforms keep Textual's driver.

Served to browsers (`slotop web`), the app runs under Textual's web driver, which gains one
instruction here: redraw the whole screen, for a browser that joins a dashboard others already
watch (it has seen none of the lines drawn before it came).
"""

from __future__ import annotations

import contextlib
from functools import partial
from typing import Any

from textual.app import App, ScreenError
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.drivers.web_driver import WebDriver

from slotop.tui.textual_internals import linux_driver
from slotop.web.protocol import REDRAW_META

REDRAW_AFTER_S = 0.05
"""How long a redraw waits: past Textual's 1/120 s wait before it lays out a new size, so a
redraw asked for with a resize draws the new layout."""


class ServedWebDriver(WebDriver):
    """Textual's web driver that also redraws the whole screen when the server asks."""

    def __init__(self, app: App[Any], **options: Any) -> None:
        super().__init__(app, **options)
        self.served_app = app

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == REDRAW_META:
            app = self.served_app
            # call_later is thread-safe (it posts a message); the timer starts on the app's loop.
            app.call_later(app.set_timer, REDRAW_AFTER_S, partial(redraw, app))
        else:
            super().on_meta(packet_type, payload)


def redraw(app: App[Any]) -> None:
    """Send every line of the screen (and of any screen under a modal) to the terminal again."""
    with contextlib.suppress(ScreenError):  # no screen yet, or none left
        app.screen.refresh()


def slotop_driver(driver_class: type[Driver]) -> type[Driver]:
    """The driver an app should run with: the quiet one where Textual would take its Linux
    driver (if it may), the served one for its web driver, Textual's choice everywhere else."""
    if driver_class is LinuxDriver:
        return linux_driver()
    if driver_class is WebDriver:
        return ServedWebDriver
    return driver_class
