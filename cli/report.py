"""`slotop report`: turn a session recording into a folder a person reads without slotop."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slotop.cli.common import EXIT_OK, EXIT_USAGE, add_common
from slotop.config import Settings

_DESCRIPTION = """\
Read a session recording (every `slotop` dashboard, `slotop sweep` and `slotop restart`
records one unless told --no-record) and write a report into DIR:

  report.md       the replica, the SLO, every configuration (the dials it ran with) with
                  its curve, SLO verdicts and operating point, each sweep's steps and pick,
                  each restart's before/after table, and every event, in time order
  steps.csv       one row per configuration and concurrency step, units in the column names
  timeline.png    the session over time: latencies against their targets, tokens/s and the
                  probe's load, KV cache and queue; every action a labelled line
  curve-N.png     configuration N: TTFT, ITL and tokens/s against concurrency, the previous
                  configuration beside it, the targets and the operating point marked
  sweep-N.png     sweep N's steps, as `slotop sweep --plot` draws them

Open report.md in any Markdown viewer (a code editor's preview, a Git forge, `glow`,
pandoc to HTML); it shows the PNGs beside it. steps.csv opens in a spreadsheet or pandas.
DIR is made when missing; in an existing DIR only these files are replaced, nothing else
is touched or deleted.
"""

_EPILOG = """\
exit codes: 0 written; 2 the recording or the folder is wrong (the message says which and why).

The report needs no settings file: the SLO, windows and dials are the ones the recording was
made with (a key an old recording lacks keeps its default). A settings file that cannot be
read is a note, not a refusal.

examples:
  slotop report ~/.local/state/slotop/sessions/20260301-101500_127.0.0.1-8000_sweep.jsonl --out sweep-report
  slotop sweep --record run.jsonl && slotop report run.jsonl --out run-report
  ls -t ~/.local/state/slotop/sessions | head     the newest recordings first
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop report` and its flags."""
    parser = sub.add_parser(
        "report",
        help="write a readable report (Markdown, PNG plots, CSV) of a session recording",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    parser.add_argument("recording", type=Path, metavar="FILE", help="a session recording (.jsonl)")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="the folder to write the report into (default: FILE's name without .jsonl, "
        "plus -report, in the current folder)",
    )
    parser.set_defaults(
        handler=_run,
        settings_optional="the report takes the SLO and settings from the recording itself",
    )


def default_folder(recording: Path) -> Path:
    """Where a report goes without --out: `<recording's stem>-report` in the current folder."""
    return Path(f"{recording.stem}-report")


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.actions.errors import ActionError
    from slotop.actions.report.write import write_report

    folder: Path = args.out if args.out is not None else default_folder(args.recording)
    try:
        written = write_report(args.recording, folder)
    except ActionError as exc:
        print(f"slotop report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for note in written.notes:
        print(f"slotop report: note: {note}", file=sys.stderr)
    if written.replaced:
        print(f"replaced in {folder}: {', '.join(written.replaced)}", file=sys.stderr)
    if written.left_alone:
        print(
            f"left alone in {folder} (named like a report's files, not part of this one): "
            f"{', '.join(written.left_alone)}",
            file=sys.stderr,
        )
    print(f"wrote {', '.join(written.files)} to {folder}")
    print(f"open {folder / 'report.md'} in a Markdown viewer")
    return EXIT_OK
