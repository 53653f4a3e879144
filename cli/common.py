"""What every subcommand shares: exit codes, the handler type, the --config and remote-load flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from slotop.config import Settings

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
        help="settings file (TOML); default ./slotop.toml when it exists",
    )


def add_allow_remote_load(parser: argparse.ArgumentParser) -> None:
    """Add --allow-remote-load, for the commands that may send load."""
    parser.add_argument(
        "--allow-remote-load",
        action="store_true",
        default=None,
        help="allow load on a replica that is not on this machine ([load] allow_remote_load)",
    )
