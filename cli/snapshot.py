"""`slotop snapshot`: one snapshot of a live replica, or of a saved /metrics dump."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slotop.cli.common import EXIT_OK, EXIT_USAGE, add_common, add_engine
from slotop.config import Settings, with_overrides


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop snapshot` and its flags."""
    parser = sub.add_parser(
        "snapshot",
        help="print one snapshot of a replica (or of a saved /metrics dump) and exit",
        description="Scrape a live replica twice, an interval apart, so rates and windowed "
        "quantiles exist, and print one snapshot; or parse a saved /metrics dump.",
    )
    add_common(parser)
    parser.add_argument("url", nargs="?", help="replica base URL (default from settings)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--metrics-file",
        type=Path,
        metavar="FILE",
        help="parse a saved /metrics dump ('-' reads stdin) instead of scraping a replica; "
        "quantiles and totals then run from the replica's start, and there are no rates",
    )
    add_engine(parser)
    parser.add_argument(
        "--interval",
        type=float,
        metavar="SECONDS",
        help="time between the two scrapes (default: [replica] scrape_interval_s)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from slotop.actions.wiring.replica import named_engine, replica_client
    from slotop.collectors.errors import MetricsParseError, ReplicaUrlError
    from slotop.collectors.gpu.reader import GpuReader, GpuSnapshot
    from slotop.collectors.oneshot import snapshot_of_dump, snapshot_of_replica
    from slotop.collectors.report import format_snapshot_text, snapshot_to_json

    settings = with_overrides(settings, {"replica.engine": args.engine})
    engine = named_engine(settings)
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
                engine=engine,
            )
            source = "metrics-file"
        else:
            settings = with_overrides(
                settings,
                {"replica.url": args.url, "replica.scrape_interval_s": args.interval},
            )
            replica = settings.replica
            with replica_client(settings) as client:
                snapshot = snapshot_of_replica(
                    client,
                    interval_s=replica.scrape_interval_s,
                    long_window_s=settings.window.long_s,
                    short_window_s=settings.window.short_s,
                    ttft_percentile=slo.ttft_percentile,
                    itl_percentile=slo.itl_percentile,
                    engine=engine,
                )
            with GpuReader(device_indices=settings.gpu.indices) as reader:
                gpu = reader.read()
            source = "live"
    except (MetricsParseError, ReplicaUrlError) as exc:
        print(f"slotop: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        data = snapshot_to_json(
            snapshot,
            source=source,
            gpu=gpu,
            ttft_target_s=slo.ttft_s,
            itl_target_s=slo.itl_s,
        )
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(format_snapshot_text(snapshot, gpu=gpu))
    return EXIT_OK
