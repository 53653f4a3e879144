"""Session recordings: one append-only JSONL file per session, its reader, and the replay of it.

`lines` is the format (the header and every line but readings), `readings`, `polls` and `status`
encode and decode the rest (pure); `files` names the files and a session's parts; `recorder`
writes them from a background thread; `reader` reads them back; `rebuild` turns a recording into
the snapshots the live monitor built; `taps` connect a monitor and a probe to a recorder.

To read a recording from Python, import from here: `read_recording(path)` gives a `Recording`
(or raises `SessionFormatError`), and `snapshots(recording)` and `snapshot_at(recording, t_s)` the
replica's snapshots as the live monitor built them.
"""

from __future__ import annotations

from slotop.actions.session.reader import Recording, SessionFormatError, read_recording
from slotop.actions.session.rebuild import snapshot_at, snapshots

__all__ = ["Recording", "SessionFormatError", "read_recording", "snapshot_at", "snapshots"]
