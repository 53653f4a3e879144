"""A real terminal for tests: one tmux session on a private server socket, read and typed into."""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Callable

import pytest


class Terminal:
    """One tmux session on a private server socket."""

    def __init__(self, command: str, width: int = 160, height: int = 50) -> None:
        # A server of its own per terminal: the last test's server may still be shutting down.
        self.socket = f"slotop-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        size = ("-x", str(width), "-y", str(height))
        started = subprocess.run(
            ["tmux", "-L", self.socket, "new-session", "-d", "-s", "demo", *size, command],
            capture_output=True,
            text=True,
            check=False,
        )
        assert started.returncode == 0, f"tmux could not start: {started.stderr}"
        self._tmux("set-option", "-t", "demo", "window-size", "manual")
        self.resize(width, height)

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False
        )
        return result.stdout

    def resize(self, width: int, height: int) -> None:
        """Make the terminal this many columns and lines."""
        self._tmux("resize-window", "-t", "demo", "-x", str(width), "-y", str(height))

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "demo")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "demo", *keys)

    def wait_for(self, found: Callable[[str], bool], timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            text = self.screen()
            if found(text):
                return text
            if time.monotonic() > deadline:
                pytest.fail(f"the screen never showed it; it shows:\n{text}")
            time.sleep(0.25)

    def close(self) -> None:
        self._tmux("kill-server")
