"""`slotop replay FILE`: the dashboard of a recorded session, played back."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slotop.cli.common import EXIT_OK, EXIT_USAGE, add_common
from slotop.config import Settings

_DESCRIPTION = """\
Play a recorded session back in the same dashboard it was watched in: every pane shows
what it showed then, rebuilt from the recording by the code that built it live (the
replica's windows and percentiles, the probe's client statistics, the curves of each
configuration, the sweep, the before/after of a restart, the timeline). Nothing is sent
to any replica: the keys that would change one (l, +/-, s, k, n, b) are off.

The header says REPLAY, where in the recording it is (its clock time, and how far into
the recording), the speed, and when and where the session was recorded.

keys:
  space, p      play or pause (at the end, play starts over)
  → / ←         pause, and step one poll of the replica forward / back
  ] / [         pause at the next / previous timeline entry or action (a load step,
                a restart's phases, a sweep)
  > / <         faster / slower: 1×, 2×, 5×, 10×, 60×
  home / end    the start / the end
  g             go to a time (as --at takes it)
  w, c, x, ?    as live: the window, the curve as numbers, hide the before/after, help
  q             quit

Every dashboard, `slotop sweep` and `slotop restart` records its session unless told
--no-record (see `slotop attach --help`); a headless recording plays back with what it
holds (the replica's numbers, the timeline, the sweep), the probe pane stays empty.
"""

_EPILOG = """\
exit codes: 0 quit; 2 the file is no recording slotop can read, --at is outside it, or the
file --config names cannot be read.

The replay needs no settings file: the SLO, windows and dials are the ones the recording was
made with (a key an old recording lacks keeps its default). A settings file found without
--config ($SLOTOP_CONFIG, ./slotop.toml, your own) that cannot be read is a note, not a
refusal; one named with --config must be right.

examples:
  slotop replay ~/.local/state/slotop/sessions/20260301-101500_127.0.0.1-8000_demo.jsonl
  slotop replay run.jsonl --speed 10            ten times as fast
  slotop replay run.jsonl --at +12:30 --paused  stopped 12 min 30 s in
  slotop replay run.jsonl --at 10:42            from 10:42 on the recording's clock
  slotop replay run.jsonl --at=-1:00            the last minute
  ls -t ~/.local/state/slotop/sessions | head   the newest recordings first
"""


def _speed(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is no number; give e.g. 1, 2.5 or 60") from None
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"{text} is no speed; give one above 0, at most 1000")
    return value


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop replay` and its flags."""
    parser = sub.add_parser(
        "replay",
        help="play a recorded session back in the dashboard (pause, step, seek, speed up)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    parser.add_argument("recording", type=Path, metavar="FILE", help="a session recording (.jsonl)")
    parser.add_argument(
        "--speed",
        type=_speed,
        default=1.0,
        help="recording seconds per second to play at (default 1; the keys step 1, 2, 5, 10, 60)",
    )
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="where to start: +OFFSET from the start (+90, +1:30, +1:02:03), -OFFSET before the "
        "end (write --at=-30, so the offset is no flag), a clock time of the recording (10:15 "
        "or 10:15:30), start or end (default: the start)",
    )
    parser.add_argument("--paused", action="store_true", help="start paused (space plays)")
    parser.set_defaults(
        handler=_run,
        settings_optional="the replay plays with the recording's own settings (fix the file "
        "for the commands that read it)",
        settings_named_strict=True,
    )


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop import fmt
    from slotop.actions.session.reader import SessionFormatError, read_recording
    from slotop.actions.session.rebuild import recorded_settings
    from slotop.tui.replay.clock import parse_position

    path: Path = args.recording
    try:
        recording = read_recording(path)
    except SessionFormatError as exc:
        print(f"slotop replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    start_s, end_s = recording.header.started_at_s, recording.last_t_s
    at_s = None
    if args.at is not None:
        try:
            at_s = parse_position(args.at, start_s, end_s)
        except ValueError as exc:
            print(f"slotop replay: --at: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if not start_s <= at_s <= end_s:
            print(
                f"slotop replay: --at {args.at} is outside {path}, which runs "
                f"{fmt.clock_span(end_s - start_s)} from its start; give a time inside it",
                file=sys.stderr,
            )
            return EXIT_USAGE
    recorded, notes = recorded_settings(recording)
    if not any(line.kind == "probe_poll" for line in recording.lines) and any(
        line.kind == "probe_records" for line in recording.lines
    ):
        notes += (
            f"{path}: recorded by `slotop {recording.header.command}`, not by a dashboard: its "
            "probe was never polled as the dashboard polls it, so the probe pane stays empty",
        )
    for note in (*recording.notes, *notes):
        print(f"slotop replay: note: {note}", file=sys.stderr)
    from slotop.tui.replay.app import ReplayApp

    app = ReplayApp(recording, recorded, speed=args.speed, at_s=at_s, notes=notes)
    if args.paused:
        app.transport.pause()
    result = app.run()
    return result or EXIT_OK
