"""`slotop web` tests: the server runs on asyncio (aiohttp); the browser's helpers are in
tests/support/browser.py, the stand-in app in tests/support/served_app.py."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    """aiohttp runs on asyncio."""
    return "asyncio"
