"""One poll loop per source, in its own thread: never overlapping itself, a failure kept as data.

The next poll is armed only after the last one ends, one interval after the last one started (at
once if it overran); between polls the thread waits on its cancel event, so stopping is instant.
A failed poll keeps the last good value, marked stale with the reason, and the loop goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from slotop.collectors.errors import CollectorError

_T = TypeVar("_T")
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PollResult(Generic[_T]):
    """The newest good value (None before the first) and whether the latest poll failed."""

    value: _T | None
    stale: bool
    error: str | None
    polled_at_s: float
    last_good_at_s: float | None
    consecutive_failures: int


def _describe(exc: BaseException) -> str:
    if isinstance(exc, CollectorError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


class Poller(Generic[_T]):
    """Calls ``poll`` every ``interval_s`` in a thread and hands each PollResult to ``on_result``.

    ``on_result`` runs in the poller's thread; a UI posts a message from it and returns.
    """

    def __init__(
        self,
        poll: Callable[[], _T],
        on_result: Callable[[PollResult[_T]], None],
        *,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        name: str = "slotop-poller",
    ) -> None:
        if not interval_s > 0:
            raise ValueError(f"poll interval must be positive, not {interval_s!r}")
        self._poll = poll
        self._on_result = on_result
        self.interval_s = interval_s
        self._clock = clock
        self._name = name
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_good: _T | None = None
        self._last_good_at_s: float | None = None
        self._failures = 0
        self.callback_failures = 0

    @property
    def running(self) -> bool:
        """Whether the loop thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def poll_once(self) -> PollResult[_T]:
        """Poll now, in the caller's thread; a raised error becomes a stale result."""
        try:
            value = self._poll()
        except Exception as exc:
            self._failures += 1
            return PollResult(
                value=self._last_good,
                stale=True,
                error=_describe(exc),
                polled_at_s=self._clock(),
                last_good_at_s=self._last_good_at_s,
                consecutive_failures=self._failures,
            )
        now = self._clock()
        self._last_good, self._last_good_at_s, self._failures = value, now, 0
        return PollResult(value, False, None, now, now, 0)

    def _run(self) -> None:
        while not self._cancel.is_set():
            started = self._clock()
            result = self.poll_once()
            if self._cancel.is_set():
                break
            try:
                self._on_result(result)
            except Exception:
                # The receiver's fault must not end the loop: log it, and poll on.
                self.callback_failures += 1
                _log.exception("%s: the poll result handler failed", self._name)
            wait_s = max(0.0, self.interval_s - (self._clock() - started))
            if self._cancel.wait(wait_s):
                break

    def start(self) -> None:
        """Start the loop thread; polls begin at once."""
        if self.running:
            raise RuntimeError("this poller is already running")
        self._cancel.clear()
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float | None = 5.0) -> None:
        """Ask the loop to end and wait for a poll in flight to finish (at most ``timeout_s``)."""
        self._cancel.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
