"""bench_tune --vllm: `slotop tune` and a 2 × 2 grid of the dials it may choose between, on the
real vLLM CPU replica the tests use.

The replica is the tiny dummy-weight Llama of `tests/support/vllm_replica.py`, started through
`slotop launch`'s code with the helper's command (its dial flags left to [launch]) at
max_num_seqs 1, where the sequence cap binds, and max_num_batched_tokens 2,048. The tune runs
through the command's own path (`run_tune`) with `--dials seqs,mbt --max-candidates 2`: vLLM's
CPU build refuses an fp8 KV cache without AVX-512, so the KV dtype is left out on both sides.
The grid is max_num_seqs {1, 4} × max_num_batched_tokens {2,048, 1,024} (both at least the
model's 1,024-token context, so no CPU needs chunked prefill for either); each cell is restarted
into through the tune's own restart (`LiveReplica.apply`: verify, roll back on failure) and
measured by a `TuneRunner` with no candidates, so its sweep, goodput and band are exactly a tune
trial's. Both sides end on the starting dials, a restart each counts. Seconds are wall time; of
them, the load seconds run from each sweep's start to its last step's end, the rest are
restarts, verifications and KV budget reads. Requests are what the replica's /metrics say it
received (`bench.tune_peers.RequestCounter`).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.tune_peers import RequestCounter
from bench.tune_table import Row, dials_words, own_band, tune_row
from slotop.actions.replica.spec import Dials, launch_spec_from_settings, restart_lock
from slotop.actions.restart.command import DialOverrides, run_launch, run_stop
from slotop.actions.tune.command import SweepLines, run_tune
from slotop.actions.tune.model import Trial
from slotop.actions.tune.output import tune_to_json
from slotop.actions.tune.plan import TuneOptions, tune_spec
from slotop.actions.tune.runner import TuneResult, TuneRunner
from slotop.actions.tune.wiring import LiveReplica
from slotop.actions.wiring.replica import probe_control
from slotop.actions.wiring.restart import restart_target
from slotop.config import LAUNCH_DIAL_FLAGS, Settings, settings_from_mapping
from tests.support.virtual_tune import Cell, Cost
from tests.support.vllm_replica import (
    REPLICA_ENV,
    ReplicaFlags,
    VllmReplica,
    build_tiny_model,
    free_port,
)

START = Dials("auto", 1, 2048)
GRID = tuple(Dials("auto", seqs, tokens) for seqs in (1, 4) for tokens in (2048, 1024))
"""The grid's cells in the order they run: the starting dials first, so it needs no restart."""
NAME = "vllm-cpu"


def vllm_settings(model: Path, folder: Path, dwell_s: float) -> Settings:
    """The tiny replica as [launch] starts it, and the tune's SLO, load, sweep and dials."""
    helper = VllmReplica(model, folder / "replica.log", ReplicaFlags(), port=free_port())
    command = [arg for arg in helper.argv() if not arg.startswith(LAUNCH_DIAL_FLAGS)]
    return settings_from_mapping(
        {
            "replica": {"url": helper.url, "scrape_interval_s": 0.5},
            "slo": {"ttft_ms": 20000, "itl_ms": 5000},
            "load": {"prompt_tokens": 32, "output_tokens": 16, "max_concurrency": 4},
            "sweep": {
                "concurrency": [1, 2, 4],
                "warmup_s": 1.0,
                "dwell_s": dwell_s,
                "max_dwell_s": 2 * dwell_s,
                "min_requests": 3,
            },
            "launch": {
                "command": command,
                "env": dict(REPLICA_ENV),
                "kv_cache_dtype": START.kv_cache_dtype,
                "max_num_seqs": START.max_num_seqs,
                "max_num_batched_tokens": START.max_num_batched_tokens,
                "log_file": str(folder / "replica.log"),
                "health_timeout_s": 300.0,
                "stop_grace_s": 15.0,
            },
            "tune": {
                "dials": ["max_num_seqs", "max_num_batched_tokens"],
                "max_candidates": 2,
                "budget_min": 60,
            },
            "session": {"folder": str(folder / "sessions")},
        },
        "bench_tune --vllm",
    )


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


def load_seconds(trials: Sequence[Trial]) -> float:
    """Seconds the trials' sweeps loaded the replica: each from its start to its last step's end."""
    total = 0.0
    for trial in trials:
        sweep = trial.sweep
        if sweep is not None and sweep.steps:
            total += max(s.started_at_s + s.measured_s for s in sweep.steps) - sweep.started_at_s
    return total


def _cost(restarts: int, requests: int, wall_s: float, trials: Sequence[Trial]) -> Cost:
    load_s = load_seconds(trials)
    return Cost(restarts=restarts, requests=requests, load_s=load_s, restart_s=wall_s - load_s)


def tune_side(settings: Settings) -> tuple[TuneResult, Cost]:
    """`slotop tune` through the command's own path, from the starting dials back to them."""
    lines = SweepLines(sys.stdout)
    with RequestCounter(settings.replica.url) as counter:
        began = time.monotonic()
        run = run_tune(
            settings,
            TuneOptions(write_report=False),
            write=_say,
            on_progress=lines.progress,
            on_step=lines.step,
        )
        wall_s = time.monotonic() - began
    assert run is not None
    result = run.result
    restarts = sum(1 for t in result.trials if t.restart != "none")
    restarts += int(any(t.restart == "applied" for t in result.trials))  # put back
    return result, _cost(restarts, counter.requests, wall_s, result.trials)


def grid_side(settings: Settings) -> tuple[tuple[Cell, ...], tuple[Trial, ...], Cost]:
    """Every cell restarted into and swept as a tune trial; the starting dials put back."""
    spec = launch_spec_from_settings(settings)
    plan = dataclasses.replace(tune_spec(settings, TuneOptions()), max_candidates=0)
    lines = SweepLines(sys.stdout)
    cells: list[Cell] = []
    trials: list[Trial] = []
    restarts = 0
    with restart_lock(spec.state_path), RequestCounter(spec.url) as counter:
        began = time.monotonic()
        target, start, how = restart_target(spec)
        replica = LiveReplica(
            settings, spec, target, how, probe_control(settings), None, _say, on_step=lines.step
        )
        now: Dials | None = start
        for dials in GRID:
            print(f"grid cell {dials_words(dials)}", flush=True)
            if now != dials:
                assert now is not None
                applied = replica.apply(now, dials)
                restarts += 1 if applied.outcome == "applied" else 2
                now = applied.dials
                if applied.outcome != "applied":
                    cells.append(Cell(dials, None, None, None, None, applied.lines[0]))
                    if now is None:
                        break
                    continue
            runner = TuneRunner(replica, plan, None, dials, spec.url, on_note=_say)
            trial = runner.run().trials[0]
            trials.append(trial)
            cells.append(
                Cell(
                    dials,
                    trial.concurrency,
                    trial.goodput_rps,
                    trial.goodput_se_rps,
                    trial.goodput_batches,
                )
            )
        if now is not None and now != start:
            print(f"grid: back to {dials_words(start)}", flush=True)
            replica.apply(now, start)
            restarts += 1
        wall_s = time.monotonic() - began
    return tuple(cells), tuple(trials), _cost(restarts, counter.requests, wall_s, trials)


def _load_average() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def _rps(value: float | None, band: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:.2f} ± {band:.2f}" if band is not None else f"{value:.2f} ± ?"


def vllm_table(row: Row, tune: TuneResult, loads: dict[str, list[float]]) -> str:
    """Each grid cell beside tune's own measure of it, both searches' cost, and whether the
    two agree."""
    measured = {t.dials: t for t in tune.trials if t.goodput_rps is not None}
    head = f"{'cell':<15} {'conc':>4} {'goodput req/s':>15}   {'tune measured it':<22}"
    lines = [head, "-" * len(head)]
    for cell in row.cells:
        mine = measured.get(cell.dials)
        theirs = (
            f"#{mine.number}: c{mine.concurrency} "
            f"{_rps(mine.goodput_rps, own_band(mine.goodput_se_rps, mine.goodput_batches))}"
            if mine is not None
            else "-"
        )
        best = "  grid's best" if row.best is not None and cell is row.best else ""
        goodput = _rps(cell.goodput_rps, own_band(cell.goodput_se_rps, cell.batches))
        lines.append(
            f"{dials_words(cell.dials):<15} {cell.concurrency or 0:>4} {goodput:>15}   "
            f"{theirs:<22}{best}" + (f"  refused: {cell.refused}" if cell.refused else "")
        )
    lines.append("")
    head = (
        f"{'search':<6} {'config':<15} {'conc':>4} {'goodput req/s':>15} {'restarts':>8} "
        f"{'requests':>8} {'seconds':>7} {'load s':>6}  load average (1, 5, 15 min)"
    )
    lines += [head, "-" * len(head)]
    best = row.best
    for search, dials, conc, rps, band, cost in (
        (
            "grid",
            best.dials if best else None,
            best.concurrency if best else None,
            best.goodput_rps if best else None,
            own_band(best.goodput_se_rps, best.batches) if best else None,
            row.grid_cost,
        ),
        (
            "tune",
            row.tune_dials,
            row.tune_concurrency,
            row.tune_goodput_rps,
            own_band(row.tune_se_rps, row.tune_batches),
            row.tune_cost,
        ),
    ):
        load = " → ".join(
            " ".join(f"{v:.1f}" for v in loads[f"{search}_{at}"]) for at in ("start", "end")
        )
        lines.append(
            f"{search:<6} {dials_words(dials):<15} {conc or 0:>4} {_rps(rps, band):>15} "
            f"{cost.restarts:>8} {cost.requests:>8,} {cost.seconds:>7.0f} {cost.load_s:>6.0f}  "
            f"{load}"
        )  # fmt: skip
    gap = (best.goodput_rps or 0.0) - (row.tune_goodput_rps or 0.0) if best is not None else None
    band = row.difference_band_rps
    how = (
        "tune chose the grid's best configuration"
        if best is not None and row.tune_dials == best.dials
        else f"gap {gap:+.2f} ± {band:.2f} req/s"
        if gap is not None and band is not None
        else "gap unknown"
    )
    lines.append("")
    lines.append(f"agree: {'yes' if row.agrees else 'NO'} ({how}); tune stopped: {tune.stop_words}")
    return "\n".join(lines)


def run_vllm(dwell_s: float) -> dict[str, Any]:
    """Launch the tiny replica, tune it, sweep the grid, stop it; the table, and the JSON."""
    loads: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tune-vllm-") as folder:
        work = Path(folder)
        os.environ["XDG_STATE_HOME"] = str(work / "state")
        model = build_tiny_model(work / "tiny-llama")
        settings = vllm_settings(model, work, dwell_s)
        spec = launch_spec_from_settings(settings)
        print(f"launching the tiny vLLM CPU replica at {dials_words(START)}", flush=True)
        try:
            run_launch(spec, DialOverrides(), _say)
            loads["tune_start"] = _load_average()
            print("slotop tune --dials seqs,mbt --max-candidates 2", flush=True)
            tune, tune_cost = tune_side(settings)
            loads["tune_end"] = loads["grid_start"] = _load_average()
            print(f"grid: {len(GRID)} cells, each swept as a tune trial", flush=True)
            cells, trials, grid_cost = grid_side(settings)
            loads["grid_end"] = _load_average()
        finally:
            run_stop(spec, _say)
    row = tune_row(NAME, tune, tune_cost, cells, grid_cost, None)
    print()
    print(vllm_table(row, tune, loads))
    return {
        **row.to_json(),
        "load_average": loads,
        "dwell_s": dwell_s,
        "grid_trials": [trial.to_json() for trial in trials],
        "tune": tune_to_json(tune),
    }
