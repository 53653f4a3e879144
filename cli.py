"""The `slotop` command line: subcommands, settings loading and exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from slotop import __version__
from slotop.config import Settings, load_settings
from slotop.errors import ConfigError, SlotopError

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

_DESCRIPTION = """\
slotop attaches to a running vLLM replica, shows whether it holds its latency SLO
(TTFT and inter-token latency percentiles), its KV-cache occupancy and GPU use, and
lets you step the load or the replica's batch limits and watch the SLO answer.

Settings come from a TOML file (--config, else ./slotop.toml if present); flags
override the file. `slotop sample-config` prints every setting, commented.
"""

_EPILOG = """\
examples:
  slotop sim --port 8000                  start the simulated replica (H100, Llama-3.1-8B)
  slotop snapshot http://127.0.0.1:8000   one snapshot of a live replica, as a table
  slotop snapshot --metrics-file m.txt --json
                                          parse a saved /metrics dump from an incident
"""

Handler = Callable[[argparse.Namespace, Settings], int]


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="settings file (TOML); default ./slotop.toml when it exists",
    )


def _add_snapshot(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "snapshot",
        help="print one snapshot of a replica (or of a saved /metrics dump) and exit",
        description="Scrape a live replica twice, an interval apart, so rates and windowed "
        "quantiles exist, and print one snapshot; or parse a saved /metrics dump.",
    )
    _add_common(parser)
    parser.add_argument("url", nargs="?", help="replica base URL (default from settings)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--metrics-file",
        type=Path,
        metavar="FILE",
        help="parse a saved /metrics dump ('-' reads stdin) instead of scraping a replica; "
        "quantiles and totals then run from the replica's start, and there are no rates",
    )
    parser.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="time between the two scrapes (default: replica.scrape_interval_s)",
    )
    parser.set_defaults(handler=_cmd_snapshot)


def _cmd_snapshot(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from slotop.collectors.errors import MetricsParseError, ReplicaUrlError
    from slotop.collectors.gpu import GpuReader, GpuSnapshot
    from slotop.collectors.oneshot import snapshot_of_dump, snapshot_of_replica
    from slotop.collectors.replica import ReplicaClient
    from slotop.collectors.report import format_snapshot_text, snapshot_to_json
    from slotop.config import with_overrides

    slo = settings.slo
    gpu: GpuSnapshot | None = None
    try:
        if args.metrics_file is not None:
            if args.url:
                print("slotop: give a replica URL or --metrics-file, not both", file=sys.stderr)
                return EXIT_USAGE
            where = "stdin" if str(args.metrics_file) == "-" else str(args.metrics_file)
            try:
                text = (
                    sys.stdin.read()
                    if where == "stdin"
                    else args.metrics_file.read_text(encoding="utf-8", errors="replace")
                )
            except OSError as exc:
                print(f"slotop: cannot read {where}: {exc.strerror or exc}", file=sys.stderr)
                return EXIT_USAGE
            snapshot = snapshot_of_dump(
                text,
                where=where,
                ttft_percentile=slo.ttft_percentile,
                itl_percentile=slo.itl_percentile,
            )
            source = "metrics-file"
        else:
            settings = with_overrides(
                settings,
                {"replica.url": args.url, "replica.scrape_interval_s": args.interval},
            )
            replica = settings.replica
            with ReplicaClient(
                replica.url, api_key=replica.api_key, timeout_s=replica.timeout_s
            ) as client:
                snapshot = snapshot_of_replica(
                    client,
                    interval_s=replica.scrape_interval_s,
                    long_window_s=settings.window.long_s,
                    short_window_s=settings.window.short_s,
                    ttft_percentile=slo.ttft_percentile,
                    itl_percentile=slo.itl_percentile,
                )
            with GpuReader(device_indices=settings.gpu.indices) as reader:
                gpu = reader.read()
            source = "live"
    except (MetricsParseError, ReplicaUrlError) as exc:
        print(f"slotop: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        data = snapshot_to_json(snapshot, source=source, gpu=gpu)
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(format_snapshot_text(snapshot, gpu=gpu))
    return EXIT_OK


def _cmd_sample_config(args: argparse.Namespace, settings: Settings) -> int:
    sys.stdout.write((Path(__file__).parent / "sample.toml").read_text(encoding="utf-8"))
    return EXIT_OK


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
        help="run the simulated vLLM replica (takes `vllm serve` flags; see slotop sim --help)",
        add_help=False,
    )
    _add_snapshot(sub)
    sample = sub.add_parser("sample-config", help="print the commented sample settings file")
    _add_common(sample)
    sample.set_defaults(handler=_cmd_sample_config)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run slotop with ``argv`` (default: the process arguments) and return the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list and args_list[0] == "sim":
        from slotop.sim.cli import main as sim_main

        return sim_main(args_list[1:])
    parser = build_parser()
    args = parser.parse_args(args_list)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        settings = load_settings(getattr(args, "config", None))
        return handler(args, settings)
    except ConfigError as exc:
        print(f"slotop: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SlotopError as exc:
        print(f"slotop: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
