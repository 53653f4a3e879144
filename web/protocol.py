"""The pipes between the server and the app it serves: Textual's web driver packets.

A packet is one byte of kind, four of payload length (big-endian) and the payload. The app writes
terminal output as `D` packets and its own news as `M` (JSON) after a line that says it speaks the
protocol; the server writes keys as `D` and instructions (size, focus, quit, redraw) as `M`.
"""

from __future__ import annotations

import json
from typing import Final

READY_LINE: Final = b"__GANGLION__\n"
"""The line the web driver writes before its first packet."""
DATA: Final = b"D"
META: Final = b"M"
HEADER_BYTES: Final = 5

REDRAW_META: Final = "slotop_redraw"
"""The instruction that has the dashboard send its whole screen again (a browser joined)."""


def packet(kind: bytes, payload: bytes) -> bytes:
    """One packet of `kind` (DATA or META) carrying `payload`."""
    return kind + len(payload).to_bytes(4, "big") + payload


def meta_packet(kind: str, **fields: object) -> bytes:
    """An instruction to the app: a META packet of a JSON object whose `type` is `kind`."""
    return packet(META, json.dumps({"type": kind, **fields}).encode())


def payload_length(header: bytes) -> int:
    """The payload length a packet's five header bytes announce."""
    return int.from_bytes(header[1:HEADER_BYTES], "big")
