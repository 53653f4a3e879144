"""The terminal modes the app has set, so a browser that joins late is put in the same ones.

The app sets its modes once, as it starts (the alternate screen, mouse reporting, bracketed
paste, a hidden cursor); a browser that opens the page later never saw those sequences. Each
DEC private mode set or reset (`ESC [ ? n h` / `l`) in the app's output is remembered, and a
newcomer is sent the last state of each before any frame. Synchronised output (2026) brackets
each frame and is left out: replaying its set would hold the newcomer's screen.
"""

from __future__ import annotations

import re

_PRIVATE_MODE = re.compile(rb"\x1b\[\?([0-9;]+)([hl])")
_MARK = b"\x1b[?"
_FRAME_BRACKET = b"2026"


class TerminalModes:
    """The last set or reset of every DEC private mode seen in a terminal's output."""

    def __init__(self) -> None:
        self._modes: dict[bytes, bytes] = {}

    def feed(self, output: bytes) -> None:
        """Take note of the modes a piece of output sets or resets."""
        if _MARK not in output:
            return
        for numbers, state in _PRIVATE_MODE.findall(output):
            for number in numbers.split(b";"):
                if number and number != _FRAME_BRACKET:
                    self._modes.pop(number, None)  # keep the order of the last change
                    self._modes[number] = state

    def replay(self) -> bytes:
        """Sequences that put a fresh terminal in the same modes, in the order last changed."""
        return b"".join(_MARK + number + state for number, state in self._modes.items())
