"""`slotop sample-config`: print the commented sample settings file, every setting in it, written
from the settings' declarations."""

from __future__ import annotations

import argparse
import sys

from slotop.cli.common import EXIT_OK, add_common
from slotop.config import Settings, sample_text


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop sample-config`."""
    sample = sub.add_parser("sample-config", help="print the commented sample settings file")
    add_common(sample)
    sample.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write(sample_text())
    return EXIT_OK
