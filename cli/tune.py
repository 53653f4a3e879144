"""`slotop tune`: the whole method, run for the operator, with its evidence."""

from __future__ import annotations

import argparse
import sys

from slotop.cli.common import (
    EXIT_FAILURE,
    add_allow_remote_load,
    add_common,
    add_record_flags,
    add_slo_flags,
    add_sweep_step_flags,
    record_choice,
    slo_overrides,
    sweep_step_overrides,
)
from slotop.config import TUNE_DIALS, Settings, with_overrides

EXIT_CHOSEN = 0
EXIT_NONE_MET = 3
EXIT_INTERRUPTED = 130

_DESCRIPTION = """\
Run the tuning method on the replica slotop manages ([launch]; `slotop launch` starts it) or
restarts with [launch] restart_command, and leave the evidence:

  1. budget   the KV cache in bytes: bytes per token, sequences that fit at max context and
              at the load's length, per KV dtype (from the replica's cache_config_info)
  2. baseline a refined sweep at the replica's own dials: operating point, goodput (requests/s
              that met both SLOs), and what binds at the first step that broke
  3. diagnose the next dial comes from what binds, not from a grid: KV capacity binds → fp8
              KV cache (greedy quality check before and after); the sequence cap binds → a
              higher max_num_seqs within the KV budget; ITL breaks while TTFT holds → a lower
              max_num_batched_tokens; the SLO itself binds with headroom elsewhere → stop
  4. measure  each candidate: restart, verify, refined sweep (bisects between the last
              concurrency that met the SLO and the first that broke)
  5. choose   the highest goodput under both SLOs; a candidate beats the baseline only beyond
              the run-to-run noise of the two, and what binds next is named

The replica ends on its original dials (or the chosen ones with --keep), verified. The session
is recorded and reported (`slotop report`'s folder: curves per configuration, every decision
and its evidence, quality results), and the chosen flags are printed as a line to paste.
"""

_EPILOG = """\
guards: --budget-min (no candidate starts that would not end in it), [load] caps and the
loopback rule (--allow-remote-load), --dials (which dials may change), Ctrl-C or SIGTERM
(the load stops, the replica goes back to its original dials, a partial report is written;
--resume FILE goes on), and a question before anything restarts (--yes skips it).

exit codes: 0 a configuration met both SLOs (chosen), 3 none did, 130 interrupted or out of
time (resume with --resume), 1 an error or the replica not verified at the end, 2 bad flags.

examples:
  slotop launch --no-attach && slotop tune --ttft-ms 500 --itl-ms 50 --yes
  slotop tune --dials seqs,mbt --budget-min 20       leave the KV dtype alone
  slotop tune --keep --json > tune.json              end on the chosen dials; schema slotop.tune/1
  slotop tune --resume ~/.local/state/slotop/sessions/…_tune.jsonl
"""

_SHORT = {"kv": "kv_cache_dtype", "seqs": "max_num_seqs", "mbt": "max_num_batched_tokens"}


def _dial_list(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    if names == ["none"]:
        return []
    full = [_SHORT.get(name, name) for name in names]
    bad = [name for name, given in zip(full, names, strict=True) if name not in TUNE_DIALS]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"{value!r}: expected dials from kv, seqs, mbt (or {', '.join(TUNE_DIALS)}), "
            "comma-separated, or none"
        )
    return list(dict.fromkeys(full))


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop tune` and its flags."""
    parser = sub.add_parser(
        "tune",
        help="run the method: budget, baseline sweep, the dial what binds names, choose; report",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    add_slo_flags(parser)
    add_sweep_step_flags(parser)
    parser.add_argument(
        "--budget-min", type=float, metavar="MIN", help="minutes it may take ([tune] budget_min)"
    )
    parser.add_argument(
        "--dials",
        type=_dial_list,
        metavar="LIST",
        help="dials it may change: kv, seqs, mbt, comma-separated ([tune] dials)",
    )
    parser.add_argument(
        "--max-candidates", type=int, metavar="N", help="configurations to try besides the own"
    )
    parser.add_argument(
        "--keep", action="store_true", help="end on the chosen dials instead of the original ones"
    )
    parser.add_argument(
        "--no-quality-check",
        action="store_true",
        help="accept a KV dtype change without the greedy before/after prompts",
    )
    parser.add_argument("--resume", metavar="FILE", help="go on with the tune recorded in FILE")
    parser.add_argument(
        "--report",
        metavar="DIR",
        help="where the report goes (default: beside the recording, its name plus -report)",
    )
    parser.add_argument("--no-report", action="store_true", help="write no report folder")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask before starting")
    add_allow_remote_load(parser)
    add_record_flags(parser)
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    import json
    from pathlib import Path

    from slotop.actions.tune.command import SweepLines, run_tune
    from slotop.actions.tune.output import format_tune_text, tune_to_json
    from slotop.actions.tune.plan import TuneOptions

    settings = with_overrides(
        settings,
        {
            **slo_overrides(args),
            "tune.budget_min": args.budget_min,
            "tune.dials": args.dials,
            "tune.max_candidates": args.max_candidates,
            **sweep_step_overrides(args, settings),
            "load.allow_remote_load": args.allow_remote_load,
        },
    )

    stream = sys.stderr if args.json else sys.stdout
    lines = SweepLines(stream)

    def write(line: str) -> None:
        lines.clear()
        print(line, file=stream, flush=True)

    def confirm(question: str) -> bool:
        if args.yes:
            return True
        if not sys.stdin.isatty():
            write("not a terminal, so nothing to ask: give --yes to tune")
            return False
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")

    options = TuneOptions(
        keep=args.keep,
        check_quality=not args.no_quality_check,
        resume_path=Path(args.resume) if args.resume else None,
        report_dir=Path(args.report) if args.report else None,
        write_report=not args.no_report,
    )
    run = run_tune(
        settings,
        options,
        write=write,
        confirm=confirm,
        record=record_choice(args, settings),
        on_progress=lines.progress,
        on_step=lines.step,
    )
    if run is None:
        return EXIT_FAILURE
    result = run.result
    recording = str(run.recording) if run.recording is not None else None
    report = str(run.report) if run.report is not None else None
    if args.json:
        data = tune_to_json(result, command=run.command, recording=recording, report=report)
        sys.stdout.write(json.dumps(data, indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write("\n" + format_tune_text(result, run.command))
    if recording is not None:
        write(f"recording: {recording}")
    if report is not None:
        write(f"report: {report}")
    if run.report_problem is not None:
        write(run.report_problem)
    if result.resumable and recording is not None:
        write(f"resume with: slotop tune --resume {recording}")
    if result.ended is None or not result.verified:
        return EXIT_FAILURE
    if result.resumable:
        return EXIT_INTERRUPTED
    return EXIT_CHOSEN if result.choice.trial is not None else EXIT_NONE_MET
