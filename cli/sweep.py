"""`slotop sweep`: ramp concurrency until the SLO bends, and recommend the operating point."""

from __future__ import annotations

import argparse
import sys

from slotop.cli.common import (
    add_allow_remote_load,
    add_common,
    add_record_flags,
    add_slo_flags,
    add_sweep_step_flags,
    record_choice,
    slo_overrides,
    sweep_step_overrides,
)
from slotop.config import Settings, with_overrides

_SWEEP_EPILOG = """\
exit codes: 0 a step met both SLOs, 3 none did, 130 interrupted (resume with --resume FILE),
1 an error, 2 bad flags or settings.

examples:
  slotop sweep --ttft-ms 500 --itl-ms 40 --json sweep.json --plot sweep.png
  slotop sweep http://127.0.0.1:8000 --concurrency 1,2,4,8 --dwell-s 30 --csv -
  slotop sweep --refine                   after the ramp breaks, bisect to the last good concurrency
  slotop sweep --resume sweep.json        go on from where an interrupted sweep stopped
  slotop sweep --resume sweep.json --refine
                                          refine a finished sweep: only the steps between are run
"""


def _concurrency_list(value: str) -> list[int]:
    try:
        steps = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected whole numbers like 1,2,4,8"
        ) from None
    if not steps or any(step < 1 for step in steps):
        raise argparse.ArgumentTypeError(f"{value!r}: expected whole numbers ≥ 1 like 1,2,4,8")
    return steps


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop sweep` and its flags."""
    parser = sub.add_parser(
        "sweep",
        help="ramp the probe's concurrency until the SLO bends and recommend the operating point",
        description="Send load at concurrency 1, 2, 4, … (or --concurrency), measure each step "
        "client-side and from /metrics, stop when an SLO breaks, throughput stops rising, the "
        "queue or preemptions grow, or at the cap; then recommend the largest concurrency that "
        "met both SLOs and say what binds next. The load always stops when the sweep does.",
        epilog=_SWEEP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    parser.add_argument("url", nargs="?", help="replica base URL (default from settings)")
    add_slo_flags(parser)
    steps = add_sweep_step_flags(parser)
    steps.add_argument(
        "--concurrency",
        type=_concurrency_list,
        metavar="LIST",
        help="the concurrencies to visit, in order, e.g. 1,2,4,8, instead of the ramp "
        "(default: [sweep] concurrency)",
    )
    steps.add_argument(
        "--warmup-s",
        type=float,
        metavar="S",
        help="seconds each step runs before it is measured (default: [sweep] warmup_s)",
    )
    steps.add_argument(
        "--min-requests",
        type=int,
        metavar="N",
        help="the fewest requests a step is judged on, however clear the 95%% intervals of its "
        "percentiles are (default: [sweep] min_requests)",
    )
    parser.add_argument(
        "--refine",
        action="store_true",
        default=None,
        help="after the ramp breaks, bisect between the operating point and the step that broke "
        "(1, 2, 4, 8, 16 breaking at 16 tries 12, then 14 or 10, ...) until they are adjacent "
        "or within [sweep] refine_resolution_ratio; each such step is measured as a ramp step",
    )
    parser.add_argument(
        "--json", metavar="FILE", help="every step as JSON, written after each ('-': stdout)"
    )
    parser.add_argument("--csv", metavar="FILE", help="every step as CSV ('-': stdout)")
    parser.add_argument("--plot", metavar="FILE.png", help="percentile vs concurrency (matplotlib)")
    parser.add_argument(
        "--resume",
        metavar="FILE",
        help="go on with the sweep saved in FILE (its steps and SLO; writes back to it)",
    )
    add_allow_remote_load(parser)
    add_record_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.actions.sweep.command import SweepOutputs, run_sweep_command

    settings = with_overrides(
        settings,
        {
            **slo_overrides(args),
            **sweep_step_overrides(args, settings),
            "sweep.concurrency": args.concurrency,
            "sweep.warmup_s": args.warmup_s,
            "sweep.min_requests": args.min_requests,
            "sweep.refine": args.refine,
            "load.allow_remote_load": args.allow_remote_load,
        },
    )
    if args.resume is not None:
        given = {
            "--ttft-ms": args.ttft_ms,
            "--itl-ms": args.itl_ms,
            "--percentile": args.percentile,
            "--concurrency": args.concurrency,
            "--max-concurrency": args.max_concurrency,
            "--dwell-s": args.dwell_s,
            "--warmup-s": args.warmup_s,
            "--min-requests": args.min_requests,
        }
        ignored = [flag for flag, value in given.items() if value is not None]
        if ignored:
            print(
                f"slotop sweep: --resume keeps the saved sweep's steps, timing and SLO; "
                f"{', '.join(ignored)} ignored",
                file=sys.stderr,
            )
    outputs = SweepOutputs(args.json, args.csv, args.plot, args.resume)
    return run_sweep_command(settings, outputs, url=args.url, record=record_choice(args, settings))
