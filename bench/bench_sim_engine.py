"""How many scheduler steps per second the simulated engine runs, in simulated time (no HTTP).

Prints, for several batch sizes, the median over repeats of steps per wall-clock second, and how
much faster than real time the simulation runs. Prompts go in as bare token counts (nothing to
hash), or with --prompt-ids as token ids that the prefix cache hashes per block, optionally
opening with a shared prefix that every request after the first hits. Run from the repository root:

    .venv/bin/python -m bench.bench_sim_engine [--prompt-ids] [--shared-prefix-tokens 256]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Iterator

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.tables import GPUS, MODELS


def prompt_stream(prompt_ids: bool, shared_prefix_tokens: int) -> Iterator[int | tuple[int, ...]]:
    """512-token prompts: bare counts, or token ids unique to each prompt after the shared ones."""
    if not prompt_ids:
        yield from itertools.repeat(512)
    shared = tuple(range(shared_prefix_tokens))
    own = 512 - shared_prefix_tokens
    for start in itertools.count(1_000_000, own):
        yield (*shared, *range(start, start + own))


def run_once(
    batch: int, steps: int, prompt: Iterator[int | tuple[int, ...]], output_tokens: int
) -> tuple[float, float]:
    """Keep `batch` requests in flight for `steps` steps; return (steps per second, sim/wall)."""
    config = resolve_engine_config(MODELS["llama-3.1-8b"], GPUS["h100-sxm"], max_model_len=8192)
    engine = Engine(config)
    next_id = 0
    for _ in range(batch):
        engine.submit(f"r{next_id}", next(prompt), output_tokens, True, 0.0)
        next_id += 1
    now = 0.0
    started = time.perf_counter()
    for _ in range(steps):
        outcome = engine.step(now)
        now = outcome.end_s
        for _ in outcome.finished:
            engine.submit(f"r{next_id}", next(prompt), output_tokens, True, now)
            next_id += 1
    wall = time.perf_counter() - started
    return steps / wall, now / wall


def main() -> None:
    """Print the median steps/s per batch size."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--prompt-ids", action="store_true", help="submit token ids instead of bare counts"
    )
    parser.add_argument(
        "--shared-prefix-tokens",
        type=int,
        default=0,
        help="with --prompt-ids: this many of the 512 prompt tokens are the same in every prompt",
    )
    args = parser.parse_args()
    print(f"{'batch':>6} {'steps/s (median)':>18} {'min':>10} {'max':>10} {'sim x realtime':>15}")
    for batch in (1, 16, 64, 256):
        rates: list[float] = []
        speedups: list[float] = []
        for _ in range(args.repeats):
            prompts = prompt_stream(args.prompt_ids, args.shared_prefix_tokens)
            rate, speedup = run_once(batch, args.steps, prompts, 256)
            rates.append(rate)
            speedups.append(speedup)
        print(
            f"{batch:>6} {statistics.median(rates):>18,.0f} {min(rates):>10,.0f} "
            f"{max(rates):>10,.0f} {statistics.median(speedups):>15,.0f}"
        )


if __name__ == "__main__":
    main()
