"""Reading a PNG's header: that a file is a PNG, and its width and height in pixels."""

from __future__ import annotations

import struct
from pathlib import Path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """Width and height from the IHDR chunk, which the PNG spec puts first; fails on a non-PNG."""
    head = path.read_bytes()[:24]
    assert head[:8] == PNG_SIGNATURE, f"{path} is not a PNG (starts {head[:8]!r})"
    assert head[12:16] == b"IHDR", f"{path}: the first chunk is {head[12:16]!r}, not IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)
