"""`slotop attach [URL]`: the live dashboard of a replica (also bare `slotop [URL]`)."""

from __future__ import annotations

import argparse

from slotop.cli.common import (
    add_allow_remote_load,
    add_common,
    add_engine,
    add_record_flags,
    record_choice,
)
from slotop.config import Settings, with_overrides


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop attach` and its flags."""
    parser = sub.add_parser(
        "attach",
        help="the live dashboard of a replica (the default: `slotop [URL]` is `slotop attach [URL]`)",
        description="Watch a replica's SLO, KV cache, GPUs and load; step the load and watch the "
        "answer. With no URL and nothing at the default, local ports 8000-8015 and 30000 (SGLang's) are searched. "
        "The load probe stays off until you turn it on (l). The session is recorded (see --record).",
    )
    add_common(parser)
    parser.add_argument("url", nargs="?", help="replica base URL (default from settings)")
    add_engine(parser)
    add_allow_remote_load(parser)
    add_record_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.tui.run import attach

    settings = with_overrides(
        settings,
        {"load.allow_remote_load": args.allow_remote_load, "replica.engine": args.engine},
    )
    return attach(settings, args.url, record=record_choice(args, settings))
