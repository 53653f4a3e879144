"""The `slotop` command line: subcommands, settings loading and exit codes.

Each subcommand is a module here that adds its parser and runs it; `main` picks one, loads the
settings and turns errors into exit codes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from slotop import __version__
from slotop.cli import (
    attach,
    budget,
    demo,
    fleet,
    launch,
    replay,
    report,
    restart,
    sample_config,
    snapshot,
    sweep,
    tune,
    web,
)
from slotop.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    Handler,
    scrubbed_output,
)
from slotop.config import Settings, load_settings, secret_values
from slotop.errors import ConfigError, SlotopError
from slotop.redact import Scrubber, argv_secrets, password_warning

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_USAGE", "build_parser", "main"]

_DESCRIPTION = """\
slotop attaches to a running vLLM replica, shows whether it holds its latency SLO
(TTFT and inter-token latency percentiles), its KV-cache occupancy and GPU use, and
lets you step the load, the KV-cache dtype or the batch limits and watch the SLO answer.

Settings come from a TOML file: --config FILE, else $SLOTOP_CONFIG, ./slotop.toml,
~/.config/slotop/slotop.toml; flags override the file. `slotop sample-config` prints
every setting, commented. Load is sent only when you turn it on, capped by [load],
and never to a replica outside loopback without --allow-remote-load.
"""

_EPILOG = """\
examples:
  slotop demo                             the simulated replica with load, on screen
  slotop http://127.0.0.1:8000            the live dashboard of a replica (= slotop attach URL)
  slotop sim --port 8000                  start the simulated replica (H100, Llama-3.1-8B)
  slotop snapshot http://127.0.0.1:8000   one snapshot of a live replica, as a table
  slotop snapshot --metrics-file m.txt --json
                                          parse a saved /metrics dump from an incident
  slotop sweep URL --ttft-ms 500 --itl-ms 40
                                          ramp concurrency until p99 bends; find the operating point
  slotop budget --model llama-3.1-8b --gpu h100-sxm
                                          KV cache in bytes: sequences that fit at max context
  slotop restart --kv-cache-dtype fp8     restart the managed replica, verify, compare before/after
  slotop tune --ttft-ms 500 --itl-ms 40   the method run for you: the dials what binds names,
                                          measured, chosen, reported; the replica put back
  slotop report FILE.jsonl --out DIR      a recorded session as Markdown, PNG plots and CSV
  slotop replay FILE.jsonl                a recorded session played back in the dashboard
  slotop fleet --prometheus URL           every replica Prometheus scrapes, worst first
  slotop web --demo                       the dashboard in a browser (slotop web --help)
"""


def _with_default_command(args_list: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Bare `slotop` and `slotop URL` mean `slotop attach [URL]`."""
    commands: set[str] = set()
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        commands.update(getattr(action, "choices", None) or ())
    if args_list and (args_list[0] in commands or args_list[0] in ("-h", "--help", "--version")):
        return args_list
    return ["attach", *args_list]


def build_parser() -> argparse.ArgumentParser:
    """Build the top-level parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="slotop",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"slotop {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser(
        "sim",
        help="run the simulated vLLM replica (takes `vllm serve` flags; see slotop sim --help), "
        "or with --engine sglang a simulated SGLang one",
        add_help=False,
    )
    for command in (
        snapshot,
        budget,
        attach,
        demo,
        launch,
        restart,
        sweep,
        tune,
        report,
        replay,
        fleet,
        web,
        sample_config,
    ):
        command.add_parser(sub)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    """The settings file's, or for a command that does without them (its `settings_optional`
    says why), the defaults with a note when the file cannot be read; a command that also sets
    `settings_named_strict` still refuses a broken file named with --config, as asked for."""
    named: Path | None = getattr(args, "config", None)
    try:
        return load_settings(named)
    except ConfigError as exc:
        why: str | None = getattr(args, "settings_optional", None)
        if why is None or (named is not None and getattr(args, "settings_named_strict", False)):
            raise
        print(f"slotop {args.command}: note: settings not read, {why}: {exc}", file=sys.stderr)
        return Settings()


def main(argv: Sequence[str] | None = None) -> int:
    """Run slotop with ``argv`` (default: the process arguments) and return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "sim":
        from slotop.sim.cli import main as sim_main

        return sim_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(_with_default_command(args_list, parser))
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        settings = _settings(args)
    except ConfigError as exc:
        print(f"slotop: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with scrubbed_output(Scrubber([*secret_values(settings), *argv_secrets(args_list)])):
        for url in (getattr(args, "url", None), settings.replica.url):
            warning = password_warning(url) if isinstance(url, str) else None
            if warning is not None:
                print(f"slotop: warning: {warning}", file=sys.stderr)
                break
        try:
            return handler(args, settings)
        except ConfigError as exc:
            print(f"slotop: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except SlotopError as exc:
            print(f"slotop: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except KeyboardInterrupt:
            return 130
