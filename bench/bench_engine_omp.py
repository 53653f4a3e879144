"""What the test engines cost with their OpenMP threads spinning and sleeping between passes.

The suite's real vLLM and SGLang replicas run beside its workers on two cores. By default the
OpenMP threads of an engine's forward pass spin after each pass, waiting for the next; under
load they hold cores the tests beside them could use. This bench starts each engine as the tests
do (tests/support/vllm_replica.py, sglang_replica.py) twice, with OpenMP's default wait and with
`OMP_WAIT_POLICY=PASSIVE`, and prints for each: the CPU its processes used idle and under a
closed load of streaming requests (the tests' `drive_load`), the requests answered, and the CPU
a request cost. CPU is the server's processes' own (`tree_cpu_seconds`), which counts each
process's threads once.

    .venv/bin/python -m bench.bench_engine_omp [--engines vllm,sglang] [--streams 4]
        [--load-s 30] [--idle-s 20]
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from tests.support.sglang_replica import SglangReplica, build_tiny_model_for_sglang
from tests.support.vllm_replica import (
    ServerProcess,
    VllmReplica,
    build_tiny_model,
    drive_load,
    tree_cpu_seconds,
)

PROMPT_TOKENS = 64
MAX_TOKENS = 64
OMP_PASSIVE = {"OMP_WAIT_POLICY": "PASSIVE"}
"""OpenMP's threads sleep between parallel regions instead of spinning for the next."""


def timed_load(url: str, streams: int, seconds: float) -> int:
    """Keep `streams` streaming completions in flight for `seconds`; return how many ended."""
    stop = threading.Event()
    threading.Timer(seconds, stop.set).start()
    result = drive_load(url, streams, streams * 10_000, MAX_TOKENS, PROMPT_TOKENS, stop=stop)
    return len(result.records)


def measure(
    kind: type[ServerProcess],
    model: Path,
    folder: Path,
    env: Mapping[str, str],
    args: argparse.Namespace,
) -> tuple[float, float, int]:
    """(idle CPU-s, loaded CPU-s, requests) of one engine started with `env` added."""
    server_kind = type(kind.__name__, (kind,), {"ENV": {**kind.ENV, **env}})
    with server_kind(model, folder / f"{kind.__name__}-{len(env)}.log") as server:
        assert server.pid is not None
        time.sleep(2.0)  # its start-up's last work
        before = tree_cpu_seconds(server.pid)
        time.sleep(args.idle_s)
        idle = tree_cpu_seconds(server.pid) - before
        requests = timed_load(server.url, args.streams, args.load_s)
        loaded = tree_cpu_seconds(server.pid) - before - idle
    return idle, loaded, requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default="vllm,sglang", help="comma-separated: vllm, sglang")
    parser.add_argument("--streams", type=int, default=4, help="requests kept in flight")
    parser.add_argument("--load-s", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--idle-s", type=float, default=20.0, help="seconds idle before the load")
    args = parser.parse_args()
    kinds: dict[str, tuple[type[ServerProcess], object]] = {
        "vllm": (VllmReplica, build_tiny_model),
        "sglang": (SglangReplica, build_tiny_model_for_sglang),
    }
    print(
        f"{args.streams} streams of {PROMPT_TOKENS}-token prompts and {MAX_TOKENS}-token answers"
        f" for {args.load_s:.0f} s, after {args.idle_s:.0f} s idle"
    )
    print(
        f"{'engine':8} {'OpenMP wait':12} {'idle CPU-s':>10} {'load CPU-s':>10} "
        f"{'requests':>9} {'CPU-ms/request':>15}"
    )
    with tempfile.TemporaryDirectory(prefix="slotop-omp-") as tmp:
        folder = Path(tmp)
        for name in args.engines.split(","):
            kind, build = kinds[name]
            model = build(folder / f"model-{name}")  # type: ignore[operator]
            for label, env in (("default", {}), ("passive", OMP_PASSIVE)):
                idle, loaded, requests = measure(kind, model, folder, env, args)
                per = 1e3 * loaded / requests if requests else float("nan")
                print(f"{name:8} {label:12} {idle:10.2f} {loaded:10.2f} {requests:9d} {per:15.1f}")


if __name__ == "__main__":
    main()
