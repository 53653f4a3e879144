"""The terminal driver: Textual's Linux driver with an input thread that sleeps while no key comes.

Textual's input thread wakes ten times a second for as long as the app runs, typed at or not: the
wake lets its parser tell a lone Escape from the first byte of a key's escape sequence once the
escape delay has passed. On a dashboard left open for hours those wakes were about a tenth of its
whole CPU (0.07–0.10% of a core of about 1%, per thread, attached to the loaded vLLM replica as
`python -m bench.bench_tui_load` attaches it). Here the thread waits on the terminal with no
timeout while input is quiet. Once bytes come it wakes on Textual's own 0.1 s beat until the
escape delay and a second more have passed without any, so a lone Escape is still answered as
Textual answers it. Stopping (quit, suspend) sets the driver's exit event, which also writes to a
pipe the thread waits on, so the thread leaves at once rather than at its next wake.

Only the Linux driver is replaced; headless runs, inline runs and other platforms keep Textual's.
Served to browsers (`slotop web`), the app runs under Textual's web driver, which gains one
instruction here: redraw the whole screen, for a browser that joins a dashboard others already
watch (it has seen none of the lines drawn before it came).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import selectors
import sys
import threading
import time
from codecs import getincrementaldecoder
from functools import partial
from typing import Any

from textual import constants
from textual._xterm_parser import XTermParser
from textual.app import App, ScreenError
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.drivers.web_driver import WebDriver

from slotop.web.protocol import REDRAW_META

TICK_S = 0.1
"""How often the thread checks the escape delay while keys are coming (Textual's own beat)."""
QUIET_S = constants.ESCAPE_DELAY + 1.0
"""How long after the last byte the thread keeps that beat before it waits with no timeout."""
THREAD_NAME = "slotop-input"
"""The input thread's name as the system shows it (`top -H`, /proc/PID/task/TID/comm)."""
_PR_SET_NAME = 15


class _WakingEvent(threading.Event):
    """An event that, once set, also makes a pipe readable while one is open for it: a thread
    waiting in select() on the pipe sees the event at once."""

    def __init__(self) -> None:
        super().__init__()
        self._pipe_lock = threading.Lock()
        self._write_fd: int | None = None

    def set(self) -> None:
        with self._pipe_lock:  # the pipe is not closed between setting and writing
            super().set()
            if self._write_fd is not None:
                with contextlib.suppress(OSError):  # a full pipe is already readable
                    os.write(self._write_fd, b"\0")

    def open_pipe(self) -> int:
        """Open the pipe the event writes to when set; return the end to wait on."""
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        with self._pipe_lock:
            self._write_fd = write_fd
        return read_fd

    def close_pipe(self, read_fd: int) -> None:
        """Close the pipe: the event writes to it no more (its numbers may be reused)."""
        with self._pipe_lock:
            write_fd, self._write_fd = self._write_fd, None
        for fd in (read_fd, write_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


class QuietInputDriver(LinuxDriver):
    """Textual's Linux driver whose input thread does not wake while the terminal is quiet.

    Each run of the thread (one per start of application mode: a suspend and resume starts
    another, on the same driver) opens its wake pipe and closes it as it leaves.
    """

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        self._exit = _WakingEvent()
        self.exit_event = self._exit

    def run_input_thread(self) -> None:
        """Read the terminal until the exit event is set, feeding Textual's key parser."""
        name_this_thread(THREAD_NAME)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        last_input_s = -QUIET_S  # quiet from the start: wait with no timeout
        wake = self._exit.open_pipe()
        try:
            with selectors.SelectSelector() as selector:  # as Textual's: kqueue takes no tty
                selector.register(self.fileno, selectors.EVENT_READ, "terminal")
                selector.register(wake, selectors.EVENT_READ, "wake")
                while not self.exit_event.is_set():
                    keys_coming = time.monotonic() - last_input_s < QUIET_S
                    for key, _ in selector.select(TICK_S if keys_coming else None):
                        if key.data == "wake":  # set: the loop's test ends it
                            continue
                        data = os.read(self.fileno, 4096)
                        if not data:  # end of input (stdin closed): nothing more will come
                            selector.unregister(self.fileno)
                            continue
                        last_input_s = time.monotonic()
                        for event in parser.feed(decode(data)):
                            self.process_message(event)
                    for event in parser.tick():  # a lone Escape, once the escape delay passed
                        self.process_message(event)
        finally:
            self._exit.close_pipe(wake)
            with contextlib.suppress(Exception):  # closes the parser; what is left is dropped
                for _ in parser.feed(""):
                    pass


def name_this_thread(name: str) -> None:
    """Give the calling thread a name the system shows (Linux; Python 3.11 names only its own
    thread objects). Best effort: where it cannot, the thread keeps the process's name."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


REDRAW_AFTER_S = 0.05
"""How long a redraw waits: past Textual's 1/120 s wait before it lays out a new size, so a
redraw asked for with a resize draws the new layout."""


class ServedWebDriver(WebDriver):
    """Textual's web driver that also redraws the whole screen when the server asks."""

    def on_meta(self, packet_type: str, payload: dict[str, object]) -> None:
        if packet_type == REDRAW_META:
            # call_later is thread-safe (it posts a message); the timer starts on the app's loop.
            self._app.call_later(self._app.set_timer, REDRAW_AFTER_S, partial(redraw, self._app))
        else:
            super().on_meta(packet_type, payload)


def redraw(app: App[Any]) -> None:
    """Send every line of the screen (and of any screen under a modal) to the terminal again."""
    with contextlib.suppress(ScreenError):  # no screen yet, or none left
        app.screen.refresh()


def slotop_driver(driver_class: type[Driver]) -> type[Driver]:
    """The driver an app should run with: the quiet one where Textual would take its Linux
    driver, the served one for its web driver, Textual's choice everywhere else."""
    if driver_class is LinuxDriver:
        return QuietInputDriver
    if driver_class is WebDriver:
        return ServedWebDriver
    return driver_class
