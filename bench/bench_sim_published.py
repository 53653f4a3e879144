"""Published vLLM runs beside what the simulated replica predicts for them, with per-GPU errors.

Each published run (`bench/published_runs.py`) is replayed through the sim's own parts in
simulated time (`slotop.sim.virtual`): the clients as the source's harness drove them, the API
server of the GPU's usual host (`slotop.sim.apiserver`), the engine and its step model. No wall
clock is involved, so the figures are the model's alone, the same on any host.

The table prints, per run and metric, the published value, the simulated one and the error,
with the run's role: `cal` runs set the sim's constants, `check` runs test them, `harness` runs
measured their client more than vLLM (their note says why) and are not scored. The summaries
give, per GPU and per kind of metric (TTFT; ITL or TPOT; end-to-end latency), the median and the
largest |error| over the check runs.

    .venv/bin/python -m bench.bench_sim_published
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable

from bench.published_runs import RUNS, SOURCES, PublishedRun
from slotop.sim.apiserver import NO_API_SERVER, ApiServerTiming, api_server_timing
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.timing import StepTimeModel
from slotop.sim.types import EngineConfig
from slotop.sim.virtual import (
    RequestRecord,
    VirtualRequest,
    VirtualRun,
    run_arrivals,
    run_closed_loop,
)

METRIC_CLASSES = {"ttft": "TTFT", "itl": "ITL/TPOT", "tpot": "ITL/TPOT", "step": "ITL/TPOT"}
"""Which kind of metric each name's prefix is (anything else: end-to-end latency)."""

CRITERIA = (0.15, 0.35)
"""What the issue asks of the check runs, per GPU and kind: median |error| and largest |error|."""


def metric_class(metric: str) -> str:
    """TTFT, ITL/TPOT, or latency."""
    return METRIC_CLASSES.get(metric.split("_", 1)[0], "latency")


def run_config(run: PublishedRun) -> EngineConfig:
    """The sim set up as the run's server was."""
    return resolve_engine_config(
        MODELS[run.model],
        GPUS[run.gpu],
        max_model_len=run.max_model_len,
        gpu_memory_utilization=run.gpu_memory_utilization,
        max_num_seqs=run.max_num_seqs,
        async_scheduling=run.async_scheduling,
    )


def _request_maker(run: PublishedRun) -> Callable[[int], VirtualRequest]:
    """The i-th request the run's clients send."""
    if run.prompt_lengths:
        return lambda i: VirtualRequest(run.prompt_lengths[i], run.output_lengths[i], run.kind)
    if run.distinct_prompts:
        # A fixed set of questions in turn: each repeat finds the earlier one's blocks cached.
        def repeated(i: int) -> VirtualRequest:
            base = 3 + (i % run.distinct_prompts) * run.prompt_tokens
            prompt = tuple(range(base, base + run.prompt_tokens))
            return VirtualRequest(prompt, run.output_tokens, run.kind)

        return repeated
    return lambda i: VirtualRequest(run.prompt_tokens, run.output_tokens, run.kind)


def replay(run: PublishedRun, api: ApiServerTiming | None = None) -> list[VirtualRun]:
    """Drive the run's load through the sim; one result per seed."""
    config = run_config(run)
    api = api if api is not None else api_server_timing(config.host)
    make = _request_maker(run)
    if run.load == "closed":
        total = run.concurrency * run.requests_per_client
        return [run_closed_loop(config, api, make, run.concurrency, total)]
    if run.load == "poisson":
        results = []
        for seed in range(run.seeds):
            rng = random.Random(seed)
            times, now = [], 0.0
            for _ in range(run.requests):
                now += rng.expovariate(run.rate_rps)
                times.append(now)
            results.append(run_arrivals(config, api, make, times))
        return results
    if run.load == "burst":
        count = len(run.prompt_lengths) or run.requests
        return [run_arrivals(config, api, make, [0.0] * count)]
    if run.load == "offline":
        return [run_arrivals(config, NO_API_SERVER, make, [0.0] * run.concurrency)]
    raise ValueError(f"run {run.key} has no replay for load {run.load!r}")


def _median(values: list[float]) -> float:
    return statistics.median(values)


def simulate(run: PublishedRun) -> dict[str, float]:
    """The sim's value of every metric the run published (milliseconds; duration in seconds)."""
    if run.load == "steps":
        timing = StepTimeModel(run_config(run))
        return {
            f"step_{batch}": timing.decode_price(batch, context).gpu_s * 1000
            for batch, context in run.steps
        }
    results = replay(run)
    found: dict[str, list[float]] = {}
    for result in results:
        records = result.records
        values = _metrics(run, records, result)
        for name, value in values.items():
            found.setdefault(name, []).append(value)
    return {name: statistics.fmean(values) for name, values in found.items()}


def _metrics(
    run: PublishedRun, records: tuple[RequestRecord, ...], result: VirtualRun
) -> dict[str, float]:
    """The run's published metrics over one replay's requests."""
    ttfts = [r.ttft_s * 1000 for r in records]
    gaps = [g * 1000 for r in records for g in r.gaps_s]
    tpots = [t * 1000 for r in records if (t := r.tpot_s) is not None]
    latencies = [(r.token_s[-1] - r.sent_s) * 1000 for r in records]
    table = {
        "ttft_p50": lambda: _median(ttfts),
        "ttft_median": lambda: _median(ttfts),
        "ttft_mean": lambda: statistics.fmean(ttfts),
        "itl_p50": lambda: _median(gaps),
        "itl_median": lambda: _median(gaps),
        "tpot_p50": lambda: _median(tpots),
        "tpot_mean": lambda: statistics.fmean(tpots),
        "latency_mean": lambda: statistics.fmean(latencies),
        "duration_s": lambda: result.end_s,
    }
    return {name: table[name]() for name in run.measured}


def main() -> int:
    """Print the table and the per-GPU error summaries."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sources", action="store_true", help="print each source in full")
    args = parser.parse_args()
    print(
        f"{'run':<22} {'gpu':<9} {'model':<12} {'role':<5} {'metric':<12} "
        f"{'published':>10} {'sim':>10} {'error':>7}  note"
    )
    errors: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for run in RUNS:
        simulated = simulate(run)
        role = {"calibration": "cal", "check": "check", "harness": "harn"}[run.role]
        for index, (metric, published) in enumerate(run.measured.items()):
            value = simulated[metric]
            error = (value - published) / published
            if run.role == "check":
                errors.setdefault((run.gpu, metric_class(metric)), []).append((run.key, error))
            note = run.note if index == 0 else ""
            print(
                f"{run.key if index == 0 else '':<22} {run.gpu if index == 0 else '':<9} "
                f"{run.model if index == 0 else '':<12} {role if index == 0 else '':<5} "
                f"{metric:<12} {published:>10.2f} {value:>10.2f} {error:>+7.1%}  {note}"
            )
    print()
    print(
        f"check runs, |error| by GPU and kind (the issue asks median <= {CRITERIA[0]:.0%}, "
        f"largest <= {CRITERIA[1]:.0%}):"
    )
    for (gpu, kind), found in sorted(errors.items()):
        sizes = [abs(e) for _, e in found]
        worst_key, worst = max(found, key=lambda item: abs(item[1]))
        met = statistics.median(sizes) <= CRITERIA[0] and max(sizes) <= CRITERIA[1]
        print(
            f"  {gpu:<9} {kind:<8} median {statistics.median(sizes):>5.1%}  largest "
            f"{abs(worst):>5.1%} ({worst_key})  over {len(sizes)}  {'met' if met else 'NOT MET'}"
        )
    print()
    print("sources:")
    for key, text in SOURCES.items():
        print(f"  {key}: {text if args.sources else text.split(', ')[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
