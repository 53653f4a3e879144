"""What a before/after's noise costs to estimate: one side's spread (`side_spread`), by its size.

The dashboard builds its before/after table once, on a worker, when the after side has its
requests; `slotop restart` builds it once per side. Each side is cut into ten batches (its
requests sent over 60 s, each living under a second), and its spread is a 1,000-replicate
bootstrap over those batches of TTFT and ITL percentiles (a request's gaps drawn with it) and
of the goodput share, and the batch means of three rates. A sweep step's intervals
(`slo_intervals`) are a bootstrap of their own, over requests (a request's gaps drawn with it):
1,000 replicates for the step's result, 200 for the check made each second of its dwell. Prints
the median and the slowest of a few runs per size, requests of 128 output tokens (127 gaps each).
Run from the repo root with the dev venv:

    .venv/bin/python -m bench.bench_noise [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from slotop.actions.restart.noise import side_spread
from slotop.actions.sweep.step import DWELL_CHECK_REPLICATES, slo_intervals
from slotop.collectors.probe.records import ProbeRecord
from slotop.slo import GoodputTargets
from tests.support.probe_steps import timed_request

SIZES = (50, 200, 1000)
TARGETS = GoodputTargets(ttft_s=0.5, tpot_s=0.05)


def _side(requests: int, seed: int) -> list[ProbeRecord]:
    rng = np.random.default_rng(seed)
    return [
        timed_request(
            0,
            i * 60.0 / requests,
            float(rng.lognormal(np.log(0.2), 0.3)),
            tuple(float(g) for g in rng.gamma(4.0, 0.005, 127)),
        )
        for i in range(requests)
    ]


def _timed(repeats: int, run: Callable[[], object]) -> list[float]:
    took = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        took.append(time.perf_counter() - started)
    return took


def _line(size: int, took: list[float]) -> str:
    return (
        f"  {size:>5} requests ({size * 127:>7,} gaps): median {statistics.median(took) * 1e3:7.1f} ms,"
        f" slowest {max(took) * 1e3:7.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"side_spread, {args.repeats} runs per size (p50 and p99, 1,000 replicates)")
    for size in SIZES:
        records = _side(size, size)
        end_s = records[-1].sent_at_s
        print(
            _line(
                size,
                _timed(
                    args.repeats,
                    lambda: side_spread(records, 0.0, end_s, (50.0, 99.0), TARGETS),  # noqa: B023
                ),
            )
        )
    for replicates in (1000, DWELL_CHECK_REPLICATES):
        print(
            f"slo_intervals, {args.repeats} runs per size (TTFT and ITL p99, {replicates:,} replicates)"
        )
        for size in SIZES:
            records = _side(size, size)
            print(
                _line(
                    size,
                    _timed(
                        args.repeats,
                        lambda: slo_intervals(records, 99.0, 99.0, replicates=replicates),  # noqa: B023
                    ),
                )
            )


if __name__ == "__main__":
    main()
