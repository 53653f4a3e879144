"""`slotop launch`: start the managed replica, wait until it is healthy, then attach."""

from __future__ import annotations

import argparse
import sys

from slotop.cli.common import EXIT_FAILURE, EXIT_OK, add_common, add_record_flags, record_choice
from slotop.cli.dials import add_dial_flags, dial_overrides
from slotop.config import Settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop launch` and its flags."""
    parser = sub.add_parser(
        "launch",
        help="start the managed replica ([launch] command) and wait until it is healthy",
        description="Start [launch] command (the simulated replica when it is empty) as a child "
        "in a process group of its own, its output appended to [launch] log_file, with the dials "
        "from [launch] or these flags; wait for /health; then attach (on a terminal). The replica "
        "keeps running after slotop exits: `slotop restart` changes its dials, `slotop launch "
        "--stop` stops it. slotop only ever signals a replica it started.",
    )
    add_common(parser)
    add_dial_flags(parser)
    parser.add_argument(
        "--stop", action="store_true", help="stop the replica slotop started, and exit"
    )
    parser.add_argument(
        "--no-attach", action="store_true", help="exit once it is healthy instead of attaching"
    )
    add_record_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.actions.replica.spec import launch_spec_from_settings
    from slotop.actions.restart.command import run_launch, run_stop

    spec = launch_spec_from_settings(settings)

    def write(line: str) -> None:
        print(line, flush=True)

    if args.stop:
        return EXIT_OK if run_stop(spec, write) else EXIT_FAILURE
    run_launch(spec, dial_overrides(args), write)
    if args.no_attach or not sys.stdout.isatty():
        return EXIT_OK
    from slotop.tui.run import attach

    return attach(settings, spec.url, record=record_choice(args, settings), command="launch")
