"""Session recordings: one append-only JSONL file per session, its reader, and the replay of it.

`format` names the schema; `readings` and `lines` encode and decode (pure); `recorder` writes the
file from a background thread; `reader` reads it back; `rebuild` turns it into the snapshots the
live monitor built; `taps` connect a monitor and a probe to a recorder.
"""
