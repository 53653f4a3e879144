"""TUI tests: their shared fakes (tui_fakes.py) import by name, as pytest's importlib mode adds no path."""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)


import pytest  # noqa: E402


@pytest.fixture
def anyio_backend() -> str:
    """Pilot tests run on asyncio, Textual's loop."""
    return "asyncio"
