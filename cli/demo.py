"""`slotop demo`: the simulated replica as a child, with the dashboard and a little load on it.

`--engine sglang` starts the replica speaking SGLang (its API, flags and /metrics, with
`--enable-metrics`) instead of vLLM.
"""

from __future__ import annotations

import argparse

from slotop.cli.common import add_common, add_record_flags, record_choice
from slotop.config import Settings


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop demo` and its flags."""
    parser = sub.add_parser(
        "demo",
        help="start the simulated replica, attach, and put a little load on it",
        description="Start `slotop sim` on a free loopback port as a child process, attach to "
        "it with the probe on at a low concurrency, and stop the child on quit.",
    )
    add_common(parser)
    parser.add_argument("--gpu", default="h100-sxm", help="simulated GPU (default h100-sxm)")
    parser.add_argument(
        "--model", default="llama-3.1-8b", help="simulated model (default llama-3.1-8b)"
    )
    parser.add_argument(
        "--engine",
        choices=["vllm", "sglang"],
        default="vllm",
        help="the server the simulated replica speaks as (default vllm); with sglang, more sim "
        "flags take SGLang's names (e.g. -- --kv-cache-dtype fp8_e4m3 --max-running-requests 64)",
    )
    parser.add_argument(
        "--concurrency", type=int, help="probe concurrency to start at ([tui] demo_concurrency)"
    )
    add_record_flags(parser)
    parser.add_argument(
        "sim_args",
        nargs=argparse.REMAINDER,
        help="after --, more `slotop sim` flags (e.g. -- --kv-cache-dtype fp8)",
    )
    parser.set_defaults(handler=_run)


def sim_engine_args(engine: str) -> list[str]:
    """The `slotop sim` flags that make the replica speak `engine` (SGLang's with its /metrics on)."""
    return ["--engine", "sglang", "--enable-metrics"] if engine == "sglang" else []


def _run(args: argparse.Namespace, settings: Settings) -> int:
    from slotop.tui.run import demo

    extra = [a for a in args.sim_args if a != "--"]
    return demo(
        settings,
        [*sim_engine_args(args.engine), "--gpu", args.gpu, "--model", args.model, *extra],
        args.concurrency,
        record=record_choice(args, settings),
    )
