"""Waiting on a Textual app under test: the screen settles when the app gets to it, which on a
busy machine is later than one `pilot.pause()`."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


async def wait_until(
    pilot: Any,
    condition: Callable[[], bool],
    timeout_s: float = 60.0,
    *,
    step_s: float = 0.1,
    what: str = "the screen never showed it",
) -> None:
    """Let the app run until `condition()` holds; fail with `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        await pilot.pause(step_s)
