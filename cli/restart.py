"""`slotop restart`: change the managed replica's dials, verify, compare before and after."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from slotop.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    add_common,
    add_record_flags,
    record_choice,
)
from slotop.cli.dials import add_dial_flags, dial_overrides
from slotop.config import Settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop restart` and its flags."""
    parser = sub.add_parser(
        "restart",
        help="restart the managed replica with other dials, verify, roll back on failure",
        description="Plan the change (flags, expected KV capacity, expected downtime), ask, "
        "then: pause the probe, stop the replica, start it with the new dials, wait for /health, "
        "verify from vllm:cache_config_info and the start-up log (SGLang: /get_server_info), "
        "/v1/models and a one-token request, resume. If the "
        "start fails, times out or verifies wrong, the log tail is shown and the previous dials "
        "are restored. Exit code 1 when it rolled back. With --concurrency, the same probe load "
        "runs for --dwell seconds before and after, and a before/after table is printed: TTFT and "
        "ITL at p50 and the SLO's percentiles, tokens/s, goodput, KV capacity, preemptions, each "
        "delta marked better or worse only when it is beyond the run-to-run noise estimated from "
        "each side's own requests (docs/before-after.md). When the "
        "KV-cache dtype changes, a fixed set of prompts ([launch] quality_prompts_file, or the "
        "built-in set) runs greedily before and after, and the share of identical output tokens "
        "and the log-probability drift are printed (--no-quality-check skips it).",
    )
    add_common(parser)
    add_dial_flags(parser)
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask before restarting")
    parser.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="measure before and after with the probe keeping N requests in flight",
    )
    parser.add_argument(
        "--dwell",
        type=float,
        metavar="SECONDS",
        help="seconds each side of the before/after is measured (default: [restart] dwell_s, 30)",
    )
    parser.add_argument(
        "--starts",
        type=int,
        metavar="N",
        help="restart N times on the same dials under --concurrency's load, measure each start's "
        "steady level, and keep how far they differ beyond their sampling noise (the replica's "
        "start-to-start spread) for its later before/afters; takes no dial flags",
    )
    parser.add_argument(
        "--no-quality-check",
        action="store_true",
        help="skip the greedy before/after prompts a KV-cache dtype change runs",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the before/after and quality check as JSON"
    )
    add_record_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from slotop.actions.replica.spec import launch_spec_from_settings
    from slotop.actions.restart.command import run_restart
    from slotop.actions.restart.table import comparison_to_json, format_comparison_text

    dwell_s = settings.restart.dwell_s if args.dwell is None else args.dwell
    if dwell_s <= 0:
        print("slotop: --dwell must be above 0 seconds", file=sys.stderr)
        return EXIT_USAGE

    def write(line: str) -> None:
        print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

    def confirm(question: str) -> bool:
        if args.yes:
            return True
        if not sys.stdin.isatty():
            write("not a terminal, so nothing to ask: give --yes to restart")
            return False
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")

    if args.starts is not None:
        return _run_starts(args, settings, dwell_s, confirm, write)
    run = run_restart(
        settings,
        launch_spec_from_settings(settings),
        dial_overrides(args),
        confirm=confirm,
        write=write,
        concurrency=args.concurrency,
        dwell_s=dwell_s,
        check_quality=not args.no_quality_check,
        record=record_choice(args, settings),
    )
    if args.json and (run.comparison is not None or run.quality is not None):
        data = comparison_to_json(run.comparison) if run.comparison is not None else {}
        if run.quality is not None:
            data["quality"] = run.quality.to_json()
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    elif not args.json:
        if run.comparison is not None:
            sys.stdout.write(format_comparison_text(run.comparison))
        if run.quality is not None:
            sys.stdout.write(run.quality.text())
    return EXIT_OK if run.result is not None and run.result.applied else EXIT_FAILURE


def _run_starts(
    args: argparse.Namespace,
    settings: Settings,
    dwell_s: float,
    confirm: Callable[[str], bool],
    write: Callable[[str], None],
) -> int:
    import json

    from slotop.actions.replica.spec import launch_spec_from_settings
    from slotop.actions.restart.command import DialOverrides
    from slotop.actions.restart.starts import MIN_STARTS
    from slotop.actions.restart.starts_run import run_starts

    if args.starts < MIN_STARTS - 1:
        print(
            f"slotop: --starts must be {MIN_STARTS - 1} or more (with the running start, "
            f"{MIN_STARTS} starts; 4 is a fair first measure)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.concurrency is None or args.concurrency < 1:
        print(
            "slotop: --starts measures each start under load: give --concurrency N, the load "
            "your before/afters run at",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if dial_overrides(args) != DialOverrides():
        print(
            "slotop: --starts restarts the replica on the dials it runs; drop the dial flags "
            "(measure, then change the dials with a plain `slotop restart`)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    spread = run_starts(
        settings,
        launch_spec_from_settings(settings),
        restarts=args.starts,
        concurrency=args.concurrency,
        dwell_s=dwell_s,
        confirm=confirm,
        write=write,
        record=record_choice(args, settings),
    )
    if spread is None:
        return EXIT_FAILURE
    if args.json:
        sys.stdout.write(json.dumps(spread.to_json(), indent=2, allow_nan=False) + "\n")
    return EXIT_OK
