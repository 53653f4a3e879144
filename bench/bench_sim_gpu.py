"""What the simulated GPUs cost the simulated replica: per engine step, and per /metrics scrape.

Runs the engine with `batch` requests in flight, side by side with its GPU accounting on and
replaced by a no-op, and prints the median wall time per step of each and their ratio; then the
median time to collect the `slotop_sim_gpu_*` families over a full window of steps. Run from the
repository root:

    .venv/bin/python -m bench.bench_sim_gpu [--batch 256] [--steps 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from slotop.sim.capacity import kv_capacity
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.engine import Engine
from slotop.sim.gpu import GpuActivity, SimGpus
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.types import EngineConfig


class NoActivity:
    """Stands where the engine's GpuActivity would, recording nothing."""

    def record(self, *_: float) -> None:
        """Do nothing."""


def _config() -> EngineConfig:
    return resolve_engine_config(MODELS["llama-3.1-8b"], GPUS["h100-sxm"], max_model_len=8192)


def step_time_s(batch: int, steps: int, accounting: bool) -> float:
    """Mean wall seconds per step with `batch` requests kept in flight."""
    engine = Engine(_config())
    if not accounting:
        engine.gpu_activity = NoActivity()  # type: ignore[assignment]
    next_id = 0
    for _ in range(batch):
        engine.submit(str(next_id), 512, 256, True, 0.0)
        next_id += 1
    now = 0.0
    began = time.perf_counter()
    for _ in range(steps):
        outcome = engine.step(now)
        now = outcome.end_s
        for _finished in outcome.finished:
            engine.submit(str(next_id), 512, 256, True, now)
            next_id += 1
    return (time.perf_counter() - began) / steps


def collect_time_s(repeats: int) -> float:
    """Wall seconds to collect the GPU families over a full window of decode steps."""
    config = _config()
    activity = GpuActivity(config)
    clock_s = [0.0]
    gpus = SimGpus(config, kv_capacity(config), activity, clock=lambda: clock_s[0])
    start = 0.0
    while start < 2.0:  # 2 s of 10 ms steps: the window holds 100 of them
        activity.record(start, start + 0.01, 256, 256, 256 * 600, 0, 0, 0)
        start += 0.01
    gpus.sync(start)
    samples = []
    for _ in range(repeats):
        began = time.perf_counter()
        list(gpus.collect())
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    on: list[float] = []
    off: list[float] = []
    for _ in range(args.repeats):  # interleaved, so drift on a shared machine hits both
        on.append(step_time_s(args.batch, args.steps, accounting=True))
        off.append(step_time_s(args.batch, args.steps, accounting=False))
    with_s, without_s = statistics.median(on), statistics.median(off)
    print(f"engine step at batch {args.batch}, median of {args.repeats} runs of {args.steps} steps")
    print(f"  with GPU accounting     {with_s * 1e6:9.1f} us")
    print(f"  without                 {without_s * 1e6:9.1f} us")
    print(f"  ratio                   {with_s / without_s:9.3f}")
    print(f"  difference per step     {(with_s - without_s) * 1e6:9.1f} us")
    collect_s = collect_time_s(max(args.repeats, 50))
    print(
        f"collecting the slotop_sim_gpu_* families (100 steps in the window): "
        f"{collect_s * 1e6:.1f} us median"
    )


if __name__ == "__main__":
    main()
