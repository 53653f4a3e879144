"""TUI tests: Pilot runs on asyncio; their shared fakes are in tests/support/tui_fakes.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from slotop.tui import textual_internals

RENDER_MODES = ("internals", "plain")
"""The two ways the dashboard draws: with the tricks of tui/textual_internals.py that this
Textual allows, and Textual's own way (as with SLOTOP_PLAIN_RENDER=1)."""


@pytest.fixture
def anyio_backend() -> str:
    """Pilot tests run on asyncio, Textual's loop."""
    return "asyncio"


@pytest.fixture(params=RENDER_MODES)
def render_mode(request: pytest.FixtureRequest) -> Iterator[str]:
    """Run the test in each drawing mode: the screen must not differ between them."""
    mode: str = request.param
    tricks = textual_internals.PLAIN if mode == "plain" else textual_internals.allowed()
    with textual_internals.using(tricks):
        yield mode
