"""TUI tests: Pilot runs on asyncio; their shared fakes are in tests/support/tui_fakes.py."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """Pilot tests run on asyncio, Textual's loop."""
    return "asyncio"
