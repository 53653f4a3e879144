"""The `slotop` command line: subcommands, settings loading and exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from slotop import __version__
from slotop.config import Settings, load_settings, with_overrides
from slotop.errors import ConfigError, SlotopError

if TYPE_CHECKING:
    from slotop.actions.restart.command import DialOverrides

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

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
    from slotop.collectors.gpu.reader import GpuReader, GpuSnapshot
    from slotop.collectors.oneshot import snapshot_of_dump, snapshot_of_replica
    from slotop.collectors.replica import ReplicaClient
    from slotop.collectors.report import format_snapshot_text, snapshot_to_json

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


_BUDGET_EPILOG = """\
the formula (per GPU):
  bytes per token = 2 (K and V) × layers × kv_heads_per_gpu × head_dim × dtype bytes
                    (kv heads split across tensor-parallel ranks; auto = the model's dtype,
                    bfloat16/float16 2 bytes, fp8 1 byte, float32 4 bytes)
  KV memory       = GPU memory × gpu_memory_utilization − weights − overheads
  blocks          = KV memory // (bytes per token × block size)
  sequences       = blocks / ceil(length / block size), at max context and at --avg-len

  Llama-3.1-8B: 2 × 32 × 8 × 128 × 2 = 131,072 B/token (128 KiB); fp8 halves it.

examples:
  slotop budget --model llama-3.1-8b --gpu h100-sxm --avg-len 2000
  slotop budget --config-json ./config.json --gpu-memory-gib 80 -tp 2 --max-model-len 32768
  slotop budget --url http://127.0.0.1:8000 --json
"""


def _add_budget(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "budget",
        help="size the KV cache in bytes: tokens, blocks and sequences that fit, per dtype",
        description="Size the KV cache per dtype from a model config.json and a GPU's memory, "
        "from the simulator's tables, or from a live replica's vllm:cache_config_info.",
        epilog=_BUDGET_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_common(parser)
    source = parser.add_argument_group("source (one of)")
    source.add_argument("--config-json", type=Path, metavar="PATH", help="a model's config.json")
    source.add_argument("--model", metavar="NAME", help="a simulator table model (with --gpu)")
    source.add_argument("--gpu", metavar="NAME", help="a simulator table GPU, e.g. h100-sxm")
    source.add_argument("--url", metavar="URL", help="a live replica: read its cache_config_info")
    sizes = parser.add_argument_group("sizes")
    sizes.add_argument("--gpu-memory-gib", type=float, metavar="GIB", help="one GPU's memory")
    sizes.add_argument(
        "--gpu-memory-utilization", type=float, metavar="RATIO", help="share vLLM takes (0.9)"
    )
    sizes.add_argument(
        "--tensor-parallel-size", "-tp", type=int, default=1, metavar="N", help="GPUs per model"
    )
    sizes.add_argument("--max-model-len", type=int, metavar="TOKENS", help="max context")
    sizes.add_argument("--avg-len", type=int, metavar="TOKENS", help="average sequence length")
    sizes.add_argument("--block-size", type=int, metavar="TOKENS", help="tokens per block (16)")
    sizes.add_argument("--weights-gib", type=float, metavar="GIB", help="weights per GPU, exact")
    sizes.add_argument(
        "--overhead-gib", type=float, metavar="GIB", help="activations, graphs, context (2.0)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=_cmd_budget)


def _cmd_budget(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from slotop.actions.budget.report import budget_to_json, format_budget_text
    from slotop.actions.budget.sources import BudgetRequest, BudgetUsageError, resolve_budget

    request = BudgetRequest(
        config_json=args.config_json,
        model=args.model,
        gpu=args.gpu,
        url=args.url,
        api_key=settings.replica.api_key,
        timeout_s=settings.replica.timeout_s,
        gpu_memory_gib=args.gpu_memory_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
        max_model_len=args.max_model_len,
        avg_len=args.avg_len,
        block_size=args.block_size,
        weights_gib=args.weights_gib,
        overhead_gib=args.overhead_gib,
    )
    try:
        budget = resolve_budget(request)
    except BudgetUsageError as exc:
        print(f"slotop budget: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json.dumps(budget_to_json(budget), indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(format_budget_text(budget))
    return EXIT_OK


def _add_allow_remote_load(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--allow-remote-load",
        action="store_true",
        default=None,
        help="allow load on a replica that is not on this machine ([load] allow_remote_load)",
    )


def _add_attach(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "attach",
        help="the live dashboard of a replica (the default: `slotop [URL]` is `slotop attach [URL]`)",
        description="Watch a replica's SLO, KV cache, GPUs and load; step the load and watch the "
        "answer. With no URL and nothing at the default, local ports 8000-8015 are searched. "
        "The load probe stays off until you turn it on (l).",
    )
    _add_common(parser)
    parser.add_argument("url", nargs="?", help="replica base URL (default from settings)")
    _add_allow_remote_load(parser)
    parser.set_defaults(handler=_cmd_attach)


def _cmd_attach(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.tui.run import attach

    settings = with_overrides(settings, {"load.allow_remote_load": args.allow_remote_load})
    return attach(settings, args.url)


def _add_demo(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "demo",
        help="start the simulated replica, attach, and put a little load on it",
        description="Start `slotop sim` on a free loopback port as a child process, attach to "
        "it with the probe on at a low concurrency, and stop the child on quit.",
    )
    _add_common(parser)
    parser.add_argument("--gpu", default="h100-sxm", help="simulated GPU (default h100-sxm)")
    parser.add_argument(
        "--model", default="llama-3.1-8b", help="simulated model (default llama-3.1-8b)"
    )
    parser.add_argument(
        "--concurrency", type=int, help="probe concurrency to start at ([tui] demo_concurrency)"
    )
    parser.add_argument(
        "sim_args",
        nargs=argparse.REMAINDER,
        help="after --, more `slotop sim` flags (e.g. -- --kv-cache-dtype fp8)",
    )
    parser.set_defaults(handler=_cmd_demo)


def _cmd_demo(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.tui.run import demo

    extra = [a for a in args.sim_args if a != "--"]
    return demo(settings, ["--gpu", args.gpu, "--model", args.model, *extra], args.concurrency)


def _dial_count(value: str) -> int:
    """A batch-limit flag: a whole number ≥ 1, or `default` (0) for the replica's own default."""
    if value.strip().lower() == "default":
        return 0
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number or 'default'") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"{number} must be at least 1 (or 'default')")
    return number


def _add_dial_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kv-cache-dtype",
        metavar="DTYPE",
        help="KV-cache element type: auto, fp8, fp8_e4m3, fp8_e5m2, bfloat16, ... "
        "(fp8 holds about twice the tokens of 16-bit)",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=_dial_count,
        metavar="N",
        help="most sequences in one batch, or 'default' for the replica's own",
    )
    parser.add_argument(
        "--max-num-batched-tokens",
        type=_dial_count,
        metavar="M",
        help="token budget of one step (chunked prefill), or 'default'",
    )


def _dial_overrides(args: argparse.Namespace) -> DialOverrides:
    from slotop.actions.restart.command import DialOverrides

    return DialOverrides(args.kv_cache_dtype, args.max_num_seqs, args.max_num_batched_tokens)


def _add_launch(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "launch",
        help="start the managed replica ([launch] command) and wait until it is healthy",
        description="Start [launch] command (the simulated replica when it is empty) as a child "
        "in a process group of its own, its output appended to [launch] log_file, with the dials "
        "from [launch] or these flags; wait for /health; then attach (on a terminal). The replica "
        "keeps running after slotop exits: `slotop restart` changes its dials, `slotop launch "
        "--stop` stops it. slotop only ever signals a replica it started.",
    )
    _add_common(parser)
    _add_dial_flags(parser)
    parser.add_argument(
        "--stop", action="store_true", help="stop the replica slotop started, and exit"
    )
    parser.add_argument(
        "--no-attach", action="store_true", help="exit once it is healthy instead of attaching"
    )
    parser.set_defaults(handler=_cmd_launch)


def _cmd_launch(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.actions.replica.spec import launch_spec_from_settings
    from slotop.actions.restart.command import run_launch, run_stop

    spec = launch_spec_from_settings(settings)

    def write(line: str) -> None:
        print(line, flush=True)

    if args.stop:
        return EXIT_OK if run_stop(spec, write) else EXIT_FAILURE
    run_launch(spec, _dial_overrides(args), write)
    if args.no_attach or not sys.stdout.isatty():
        return EXIT_OK
    from slotop.tui.run import attach

    return attach(settings, spec.url)


def _add_restart(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "restart",
        help="restart the managed replica with other dials, verify, roll back on failure",
        description="Plan the change (flags, expected KV capacity, expected downtime), ask, "
        "then: pause the probe, stop the replica, start it with the new dials, wait for /health, "
        "verify from vllm:cache_config_info, /v1/models and the start-up log, resume. If the "
        "start fails, times out or verifies wrong, the log tail is shown and the previous dials "
        "are restored. Exit code 1 when it rolled back. With --concurrency, the same probe load "
        "runs for --dwell seconds before and after, and a before/after table is printed. When the "
        "KV-cache dtype changes, a fixed set of prompts ([launch] quality_prompts_file, or the "
        "built-in set) runs greedily before and after, and the share of identical output tokens "
        "and the log-probability drift are printed (--no-quality-check skips it).",
    )
    _add_common(parser)
    _add_dial_flags(parser)
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
        default=30.0,
        metavar="SECONDS",
        help="seconds each side of the before/after is measured (default 30)",
    )
    parser.add_argument(
        "--no-quality-check",
        action="store_true",
        help="skip the greedy before/after prompts a KV-cache dtype change runs",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the before/after and quality check as JSON"
    )
    parser.set_defaults(handler=_cmd_restart)


def _cmd_restart(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from slotop.actions.replica.spec import launch_spec_from_settings
    from slotop.actions.restart.command import run_restart
    from slotop.actions.restart.compare import comparison_to_json, format_comparison_text

    if args.dwell <= 0:
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

    run = run_restart(
        settings,
        launch_spec_from_settings(settings),
        _dial_overrides(args),
        confirm=confirm,
        write=write,
        concurrency=args.concurrency,
        dwell_s=args.dwell,
        check_quality=not args.no_quality_check,
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


_SWEEP_EPILOG = """\
exit codes: 0 a step met both SLOs, 3 none did, 130 interrupted (resume with --resume FILE),
1 an error, 2 bad flags or settings.

examples:
  slotop sweep --ttft-ms 500 --itl-ms 40 --json sweep.json --plot sweep.png
  slotop sweep http://127.0.0.1:8000 --concurrency 1,2,4,8 --dwell-s 30 --csv -
  slotop sweep --resume sweep.json        go on from where an interrupted sweep stopped
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


def _add_sweep(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    _add_common(parser)
    parser.add_argument("url", nargs="?", help="replica base URL (default from settings)")
    parser.add_argument("--ttft-ms", type=float, metavar="MS", help="TTFT target (slo.ttft_ms)")
    parser.add_argument("--itl-ms", type=float, metavar="MS", help="ITL target (slo.itl_ms)")
    parser.add_argument(
        "--percentile", type=float, metavar="P", help="percentile of both targets (e.g. 99)"
    )
    parser.add_argument(
        "--concurrency", type=_concurrency_list, metavar="LIST", help="steps, e.g. 1,2,4,8"
    )
    parser.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="last geometric step (sweep.max_concurrency)",
    )
    parser.add_argument("--dwell-s", type=float, metavar="S", help="seconds measured per step")
    parser.add_argument("--warmup-s", type=float, metavar="S", help="seconds before measuring")
    parser.add_argument("--min-requests", type=int, metavar="N", help="requests per step, at least")
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
    _add_allow_remote_load(parser)
    parser.set_defaults(handler=_cmd_sweep)


def _cmd_sweep(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.actions.sweep.command import SweepOutputs, run_sweep_command

    settings = with_overrides(
        settings,
        {
            "slo.ttft_ms": args.ttft_ms,
            "slo.itl_ms": args.itl_ms,
            "slo.ttft_percentile": args.percentile,
            "slo.itl_percentile": args.percentile,
            "sweep.concurrency": args.concurrency,
            "sweep.max_concurrency": args.max_concurrency,
            "sweep.dwell_s": args.dwell_s,
            "sweep.max_dwell_s": (
                max(args.dwell_s, settings.sweep.max_dwell_s) if args.dwell_s else None
            ),
            "sweep.warmup_s": args.warmup_s,
            "sweep.min_requests": args.min_requests,
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
    return run_sweep_command(settings, outputs, url=args.url)


def _with_default_command(args_list: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """Bare `slotop` and `slotop URL` mean `slotop attach [URL]`."""
    commands: set[str] = set()
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        commands.update(getattr(action, "choices", None) or ())
    if args_list and (args_list[0] in commands or args_list[0] in ("-h", "--help", "--version")):
        return args_list
    return ["attach", *args_list]


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
    _add_budget(sub)
    _add_attach(sub)
    _add_demo(sub)
    _add_launch(sub)
    _add_restart(sub)
    _add_sweep(sub)
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
    args = parser.parse_args(_with_default_command(args_list, parser))
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
