"""What subcommands share: exit codes, the handler type, --config, remote load and recording flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from slotop.config import Settings

if TYPE_CHECKING:
    from slotop.actions.session.recorder import RecordChoice

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace, Settings], int]


def add_common(parser: argparse.ArgumentParser) -> None:
    """Add --config, which every subcommand takes."""
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings file (TOML); without it, $SLOTOP_CONFIG, else the first of "
        "./slotop.toml and $XDG_CONFIG_HOME/slotop/slotop.toml (~/.config when unset) that exists",
    )


def add_allow_remote_load(parser: argparse.ArgumentParser) -> None:
    """Add --allow-remote-load, for the commands that may send load."""
    parser.add_argument(
        "--allow-remote-load",
        action="store_true",
        default=None,
        help="allow load on a replica that is not on this machine ([load] allow_remote_load)",
    )


def add_record_flags(parser: argparse.ArgumentParser) -> None:
    """Add --record FILE and --no-record, for the commands that record their session."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--record",
        type=Path,
        metavar="FILE",
        help="record this session to FILE, a new file (JSONL, mode 0600). By default every "
        "session is recorded to a file named by start time, replica host-port and command in "
        "$XDG_STATE_HOME/slotop/sessions (~/.local/state/slotop/sessions when unset; "
        "[session] folder moves it)",
    )
    group.add_argument(
        "--no-record",
        action="store_true",
        help="do not record this session ([session] record = false does the same for all)",
    )


def record_choice(args: argparse.Namespace, settings: Settings) -> RecordChoice:
    """Whether and where to record, from --record / --no-record and [session]."""
    from slotop.actions.session.recorder import record_choice as choose

    return choose(settings, args.record, args.no_record)
