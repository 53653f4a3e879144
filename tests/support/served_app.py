"""A stand-in for the dashboard under Textual's web driver, for tests of `slotop web`'s server.

It speaks the driver's protocol on its pipes and says in words what reached it: it starts with
the modes the driver sets and a line with its size, then answers each key with `typed:KEYS` (and ends, with exit code 0, on
`q`), each
size with `size:WxH`, a redraw with `redraw`, focus with `focus`/`blur`, and quits on `quit`.
Run with `fail` it writes to stderr and ends before speaking the protocol, as a broken app would.

    python -m tests.support.served_app [fail]
"""

from __future__ import annotations

import json
import os
import sys

STARTING_MODES = b"\x1b[?1049h\x1b[?1000h\x1b[?1006h\x1b[?25l"


def _packet(kind: bytes, payload: bytes) -> None:
    os.write(1, kind + len(payload).to_bytes(4, "big") + payload)


def _read_exactly(size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = os.read(0, size - len(data))
        if not chunk:
            raise SystemExit(0)
        data += chunk
    return data


def main() -> None:
    if sys.argv[1:] == ["fail"]:
        print("the settings file says no", file=sys.stderr, flush=True)
        raise SystemExit(3)
    os.write(1, b"__GANGLION__\n")
    _packet(b"D", STARTING_MODES)
    _packet(b"D", f"size:{os.environ['COLUMNS']}x{os.environ['ROWS']}".encode())
    while True:
        header = _read_exactly(5)
        payload = _read_exactly(int.from_bytes(header[1:], "big"))
        if header[:1] == b"D":
            _packet(b"D", b"typed:" + payload)
            if payload == b"q":
                _packet(b"M", json.dumps({"type": "exit"}).encode())
                return
            continue
        meta = json.loads(payload)
        kind = meta["type"]
        if kind == "resize":
            _packet(b"D", f"size:{meta['width']}x{meta['height']}".encode())
        elif kind == "slotop_redraw":
            _packet(b"D", b"redraw")
        elif kind in ("focus", "blur"):
            _packet(b"D", kind.encode())
        elif kind == "quit":
            _packet(b"M", json.dumps({"type": "exit"}).encode())
            return


if __name__ == "__main__":
    main()
