"""How many scheduler steps per second the simulated engine runs, in simulated time (no HTTP).

Prints, for several batch sizes, the median over repeats of steps per wall-clock second, and how
much faster than real time the simulation runs. Run from the repository root:

    .venv/bin/python -m bench.bench_sim_engine
"""

from __future__ import annotations

import argparse
import statistics
import time

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.tables import GPUS, MODELS


def run_once(batch: int, steps: int, prompt_tokens: int, output_tokens: int) -> tuple[float, float]:
    """Keep `batch` requests in flight for `steps` steps; return (steps per second, sim/wall)."""
    config = resolve_engine_config(MODELS["llama-3.1-8b"], GPUS["h100-sxm"], max_model_len=8192)
    engine = Engine(config)
    next_id = 0
    for _ in range(batch):
        engine.submit(f"r{next_id}", prompt_tokens, output_tokens, True, 0.0)
        next_id += 1
    now = 0.0
    started = time.perf_counter()
    for _ in range(steps):
        outcome = engine.step(now)
        now = outcome.end_s
        for _ in outcome.finished:
            engine.submit(f"r{next_id}", prompt_tokens, output_tokens, True, now)
            next_id += 1
    wall = time.perf_counter() - started
    return steps / wall, now / wall


def main() -> None:
    """Print the median steps/s per batch size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"{'batch':>6} {'steps/s (median)':>18} {'min':>10} {'max':>10} {'sim x realtime':>15}")
    for batch in (1, 16, 64, 256):
        rates: list[float] = []
        speedups: list[float] = []
        for _ in range(args.repeats):
            rate, speedup = run_once(batch, args.steps, 512, 256)
            rates.append(rate)
            speedups.append(speedup)
        print(
            f"{batch:>6} {statistics.median(rates):>18,.0f} {min(rates):>10,.0f} "
            f"{max(rates):>10,.0f} {statistics.median(speedups):>15,.0f}"
        )


if __name__ == "__main__":
    main()
