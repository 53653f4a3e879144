"""`slotop tune` against a full grid of the same dials (the vLLM auto_tune way), on the simulated
replica: restarts and wall time to the answer, and goodput of each answer.

vLLM's benchmarks/auto_tune script starts the server once per cell of max_num_seqs ×
max_num_batched_tokens and benchmarks each; here each cell (× KV dtype) is restarted into and
swept exactly as a tune candidate is (refined, the same [sweep] timing), and the grid's answer is
the cell with the highest goodput at its operating point. The tune runs first, from the same
starting dials. The replica is the one the tune's sim test uses: Llama-3.1-8B on a simulated
H100 given 21.7% of its memory (4 of the load's 1,056-token sequences at 16 bits, 8 at fp8),
starting at max_num_seqs 6. Both measure under the same load, one after the other, so their
goodputs carry the same run-to-run noise (the tune prints each of its ± bands).

    .venv/bin/python -m bench.bench_tune [--seqs 4,6,8,12] \\
        [--batched 2048,8192] [--dtypes auto,fp8] [--dwell-s 1.5]
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from slotop.actions.replica.spec import Dials, launch_spec_from_settings
from slotop.actions.restart.command import DialOverrides, run_launch, run_stop
from slotop.actions.sweep.decide import ReplicaLimits
from slotop.actions.tune.command import run_tune
from slotop.actions.tune.model import operating_step, step_goodput_rps
from slotop.actions.tune.plan import TuneOptions, tune_spec
from slotop.actions.tune.wiring import LiveReplica
from slotop.actions.wiring.replica import probe_control
from slotop.actions.wiring.restart import restart_target
from slotop.config import Settings, settings_from_mapping
from tests.support.vllm_replica import free_port

START = Dials("auto", 6)


def _settings(port: int, dwell_s: float, folder: Path) -> Settings:
    command = [
        sys.executable, "-m", "slotop.sim", "--host", "127.0.0.1", "--port", str(port),
        "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpu-memory-utilization", "0.217",
        "--max-model-len", "2048",
    ]  # fmt: skip
    return settings_from_mapping(
        {
            "replica": {"url": f"http://127.0.0.1:{port}", "scrape_interval_s": 0.5},
            "slo": {"ttft_ms": 500, "itl_ms": 100},
            "load": {"prompt_tokens": 1024, "output_tokens": 32, "max_concurrency": 16},
            "sweep": {
                "concurrency": [2, 4, 8, 16],
                "warmup_s": 0.5,
                "dwell_s": dwell_s,
                "min_requests": 6,
                "max_dwell_s": 2 * dwell_s,
                "max_follow_s": 1.0,
                "queue_waiting_requests": 2.0,
            },
            "launch": {
                "command": command,
                "max_num_seqs": START.max_num_seqs,
                "health_timeout_s": 30.0,
                "stop_grace_s": 3.0,
            },
            "tune": {"max_candidates": 6},
            "session": {"folder": str(folder / "sessions")},
        },
        "bench_tune",
    )


def _ints(value: str) -> list[int]:
    return [int(part) for part in value.split(",") if part.strip()]


def _quiet(_line: str) -> None:
    pass


def run_grid(
    settings: Settings, cells: list[Dials]
) -> tuple[list[tuple[Dials, int | None, float | None]], int, float]:
    """Restart into each cell and sweep it; each cell's operating point and goodput, the
    restarts (the last one puts the starting dials back) and the wall time."""
    spec = launch_spec_from_settings(settings)
    target, current, how = restart_target(spec)
    replica = LiveReplica(settings, spec, target, how, probe_control(settings), None, _quiet)
    sweep = tune_spec(settings, TuneOptions()).sweep
    began, restarts, found = time.monotonic(), 0, []
    for dials in cells:
        if dials != current:
            applied = replica.apply(current, dials)
            restarts += 1
            current = applied.dials or current
            if applied.outcome != "applied":
                found.append((dials, None, None))
                continue
        limits = ReplicaLimits(dials.max_num_seqs, dials.max_num_batched_tokens)
        result = replica.sweep(
            dataclasses.replace(sweep, limits=limits),
            None,
            threading.Event(),
            lambda _update: None,
            lambda _step, _records: None,
        )
        point = operating_step(result)
        goodput = step_goodput_rps(point) if point is not None else None
        found.append((dials, result.recommendation.concurrency, goodput))
        print(f"  grid {' '.join(dials.flag_args())}: point {result.recommendation.concurrency}, "
              f"goodput {goodput or 0:.2f} req/s", flush=True)  # fmt: skip
    if current != START:
        replica.apply(current, START)
        restarts += 1
    return found, restarts, time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seqs", type=_ints, default=[4, 6, 8, 12], help="max_num_seqs values")
    parser.add_argument(
        "--batched", type=_ints, default=[2048, 8192], help="max_num_batched_tokens values"
    )
    parser.add_argument("--dtypes", default="auto,fp8", help="KV dtypes")
    parser.add_argument("--dwell-s", type=float, default=1.5, help="seconds measured per step")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        os.environ["XDG_STATE_HOME"] = str(Path(folder) / "state")
        settings = _settings(free_port(), args.dwell_s, Path(folder))
        spec = launch_spec_from_settings(settings)
        run_launch(spec, DialOverrides(), _quiet)
        try:
            began = time.monotonic()
            tuned = run_tune(settings, TuneOptions(write_report=False), write=_quiet)
            tune_wall_s = time.monotonic() - began
            assert tuned is not None
            result = tuned.result
            tune_restarts = sum(1 for t in result.trials if t.restart != "none")
            tune_restarts += int(any(t.restart == "applied" for t in result.trials))  # put back
            for trial in result.trials:
                print(f"  tune #{trial.number} {' '.join(trial.dials.flag_args())}: point "
                      f"{trial.concurrency}, goodput {trial.goodput_rps or 0:.2f} ± "
                      f"{1.96 * (trial.goodput_se_rps or 0):.2f} req/s", flush=True)  # fmt: skip
            cells = [
                Dials(dtype, seqs, batched)
                for dtype, seqs, batched in itertools.product(
                    args.dtypes.split(","), args.seqs, args.batched
                )
            ]
            grid, grid_restarts, grid_wall_s = run_grid(settings, cells)
        finally:
            run_stop(spec, _quiet)
    best = max(grid, key=lambda cell: cell[2] or 0.0)
    choice = result.choice
    print(
        f"grid: {len(cells)} cells ({len(args.dtypes.split(','))} dtypes × {len(args.seqs)} "
        f"max_num_seqs × {len(args.batched)} max_num_batched_tokens)"
    )
    print(f"restarts to the answer: tune {tune_restarts}, grid {grid_restarts}")
    print(
        f"wall time to the answer: tune {tune_wall_s:.0f} s, grid {grid_wall_s:.0f} s "
        f"(ratio {grid_wall_s / tune_wall_s:.1f}×)"
    )
    print(
        f"tune's choice: {' '.join(choice.dials.flag_args()) if choice.dials else 'none'} at "
        f"concurrency {choice.concurrency}, goodput {choice.goodput_rps or 0:.2f} req/s"
    )
    print(
        f"grid's best:   {' '.join(best[0].flag_args())} at concurrency {best[1]}, goodput "
        f"{best[2] or 0:.2f} req/s (tune/grid {(choice.goodput_rps or 0) / (best[2] or 1):.2f})"
    )


if __name__ == "__main__":
    main()
