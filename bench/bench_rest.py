"""Why a stream rests before its next request: TTFT against the probe's own turnaround.

A closed-loop stream sends its next request a turnaround after the last ended. Without a rest,
that turnaround (how fast the probe is on this machine) sets where in the replica's engine step
each request lands, and so part of its TTFT. With the probe's rest (`worker.rest_s`, a uniform
share of one step) the answer should not depend on it. In virtual time against the simulated
engine, so the figures are the engine's and not this machine's load.

    python -m bench.bench_rest
"""

from __future__ import annotations

import argparse

import numpy as np

from slotop.collectors.probe.settle import settled_by, steady
from tests.support.virtual_load import SetLoad, VirtualRun, engine_config, fixed_shape

TURNAROUNDS_S = (0.0005, 0.0015, 0.003, 0.006)


def ttft_p50_ms(
    rest: bool, turnaround_s: float, seed: int, concurrency: int, duration_s: float
) -> float:
    """TTFT p50 of the settled load at `concurrency` for one seed, with or without the rest."""
    run = VirtualRun(
        engine_config(), fixed_shape(), seed=seed, turnaround_s=turnaround_s, rest=rest
    )
    run.run([SetLoad(0.0, concurrency)], duration_s)
    settled = settled_by(run.records, 0.0, duration_s)
    ttft = [r.ttft_s for r in steady(run.records, settled) if r.ttft_s is not None]
    return float(np.percentile(ttft, 50)) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=5)
    parser.add_argument("--duration", type=float, default=60.0, help="virtual seconds per run")
    args = parser.parse_args()
    print(
        f"simulated H100, Llama-3.1-8B, 512/128 tokens, {args.concurrency} in flight, "
        f"{args.duration:g} virtual s, TTFT p50 (ms) per seed"
    )
    for label, rest in (("with the rest", True), ("without", False)):
        for turnaround in TURNAROUNDS_S:
            p50 = [
                ttft_p50_ms(rest, turnaround, seed, args.concurrency, args.duration)
                for seed in range(args.seeds)
            ]
            shown = ", ".join(f"{v:.1f}" for v in p50)
            print(f"{label:14} turnaround {turnaround * 1e3:3.1f} ms: {shown}")


if __name__ == "__main__":
    main()
