"""`slotop tune` and a full grid of its dials against the simulated engine in virtual time.

`VirtualReplica` is a tune's replica (`slotop.actions.tune.runner.TuneReplica`) over the simulated
engine: a restart swaps in the engine `slotop sim` would start with the new dials (its KV cache
sized as vLLM sizes it, activation peak included), priced at a fixed number of seconds; a sweep
is the real `SweepRunner` over a `VirtualRun`, its clock moved only by the runner's sleeps. It
counts what a search costs: restarts, requests sent and seconds. `run_tune` drives the real
`TuneRunner` over it; `run_grid` restarts into every cell and sweeps each exactly as a tune
candidate is swept, and the cell with the highest goodput at its operating point is the grid's.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slotop.actions.budget.readings import CacheInfo, budget_from_cache_info
from slotop.actions.probe_control import ProbeControl
from slotop.actions.replica.spec import Dials
from slotop.actions.restart.noise import side_spread
from slotop.actions.sweep.decide import ReplicaLimits
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import StepMeasured, SweepProgress, SweepResult, SweepRunner
from slotop.actions.tune.capacity import Capacity, capacity_from_budget, capacity_from_sglang
from slotop.actions.tune.model import TuneSpec, operating_step
from slotop.actions.tune.runner import Applied, QualityResult, TuneResult, TuneRunner
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.snapshot import KvCacheState
from slotop.sim.capacity import kv_capacity
from slotop.sim.errors import SimConfigError
from slotop.sim.types import EngineConfig
from slotop.slo import GoodputTargets
from tests.support.virtual_load import VirtualRun
from tests.support.virtual_sweep import URL, VirtualClock, VirtualProbe, VirtualWatch

RESTART_S = 60.0
"""What one restart costs in virtual seconds: an assumption for a vLLM replica of an 8B model
on one GPU (weights, the profile run, CUDA graphs), not a measurement; the seconds of load are
counted apart."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A simulated replica with a best configuration only a full grid knows: its engine at any
    dials, the load and the tune's plan, the dials it starts on, the grid's cells, and the
    `slotop sim` flags that start it in real time."""

    name: str
    words: str
    engine: Callable[[Dials], EngineConfig]
    shape: LoadShape
    spec: TuneSpec
    start: Dials
    grid: tuple[Dials, ...]
    sim_flags: tuple[str, ...] = ()
    """`slotop sim`'s flags for the same replica, the dials apart (for the real-time benches)."""

    @property
    def load_tokens(self) -> int:
        """Tokens a request holds at its end (mean prompt and output)."""
        return self.shape.prompt_lengths.mean_tokens + self.shape.output_lengths.mean_tokens


def grid_cells(
    dtypes: Sequence[str], seqs: Sequence[int], batched: Sequence[int]
) -> tuple[Dials, ...]:
    """Every combination of the three dials, vLLM's order of checks kept (tokens ≥ sequences)."""
    return tuple(
        Dials(dtype, n, tokens)
        for dtype, n, tokens in itertools.product(dtypes, seqs, batched)
        if tokens >= n
    )


@dataclass(slots=True)
class Cost:
    """What a search spent: restarts, requests sent, seconds of load and of restarts."""

    restarts: int = 0
    requests: int = 0
    load_s: float = 0.0
    restart_s: float = 0.0

    @property
    def seconds(self) -> float:
        """Load and restarts together."""
        return self.load_s + self.restart_s


class VirtualReplica:
    """The scenario's replica at its current dials, as a tune's `TuneReplica`, in virtual time."""

    def __init__(self, scenario: Scenario, *, seed: int = 0, restart_s: float = RESTART_S) -> None:
        self.scenario = scenario
        self.dials = scenario.start
        self.cost = Cost()
        self._restart_s = restart_s
        self._seeds = itertools.count(seed * 1000)
        self._clock: VirtualClock | None = None
        self.measured: dict[tuple[Dials, int], Sequence[ProbeRecord]] = {}
        """Each swept step's records, by the dials and concurrency it ran at."""

    def now(self) -> float:
        """Virtual seconds since the search began: its load and its restarts."""
        inside = self._clock.now_s if self._clock is not None else 0.0
        return self.cost.seconds + inside

    def config(self, dials: Dials | None = None) -> EngineConfig:
        """The engine `slotop sim` starts with these dials (the current ones by default)."""
        return self.scenario.engine(dials or self.dials)

    def capacity(self) -> Capacity:
        """The KV budget as `slotop tune` reads it: from the replica's `vllm:cache_config_info`,
        or an SGLang replica's pool gauges."""
        config = self.config()
        sized = kv_capacity(config)
        load = self.scenario.load_tokens
        if self.dials.engine == "sglang":
            tokens = sized.kv_cache_size_tokens
            gauges = KvCacheState(
                usage_ratio=0.0,
                usage_ratio_by_engine=(),
                block_size_tokens=config.block_size,
                blocks_total=tokens // config.block_size,
                blocks_used=0,
                blocks_free=tokens // config.block_size,
                cache_dtype=None,
                size_tokens=tokens,
                max_concurrency=tokens / config.max_model_len,
                gpu_memory_utilization=None,
            )
            return capacity_from_sglang(gauges, config.kv_cache_dtype, load)
        info = CacheInfo(
            num_gpu_blocks=sized.num_gpu_blocks,
            block_size_tokens=config.block_size,
            cache_dtype=config.kv_cache_dtype,
            gpu_memory_utilization=config.gpu_memory_utilization,
            kv_cache_memory_bytes=sized.available_kv_cache_bytes,
            kv_cache_size_tokens=sized.kv_cache_size_tokens,
            max_concurrency=sized.max_concurrency,
        )
        return capacity_from_budget(budget_from_cache_info(info, avg_len_tokens=load), load)

    def apply(self, before: Dials, after: Dials) -> Applied:
        """Restart into `after`; a configuration vLLM refuses to start rolls back to `before`."""
        self.cost.restarts += 1
        self.cost.restart_s += self._restart_s
        try:
            kv_capacity(self.config(after))
        except SimConfigError as exc:
            self.cost.restarts += 1
            self.cost.restart_s += self._restart_s
            return Applied("rolled back", before, (f"refused: {exc}",))
        self.dials = after
        lines = (f"restarted into {' '.join(after.flag_args())}",)
        return Applied("applied", after, lines, self._restart_s, self.capacity())

    def verify(self, dials: Dials) -> tuple[bool, tuple[str, ...]]:
        """The replica runs what it was restarted into."""
        return dials == self.dials, ()

    def sweep(
        self,
        spec: SweepSpec,
        resume: SweepResult | None,
        cancel: threading.Event,
        on_progress: Callable[[SweepProgress], None],
        on_measured: StepMeasured,
    ) -> SweepResult:
        """A whole sweep of `spec` at the current dials, on a fresh run of the engine."""
        run = VirtualRun(self.config(), self.scenario.shape, seed=next(self._seeds))
        clock = VirtualClock(run)
        self._clock = clock

        def start(_: Any, __: Any, concurrency: int | None, rate: float | None) -> VirtualProbe:
            assert concurrency is not None and rate is None
            return VirtualProbe(clock, concurrency)

        def measured(step: StepResult, records: Sequence[ProbeRecord]) -> None:
            self.measured[(self.dials, step.concurrency)] = records
            on_measured(step, records)

        control = ProbeControl(
            ProbeTarget(URL), self.scenario.shape, False, start_probe=start, clock=clock
        )
        runner = SweepRunner(
            control,
            VirtualWatch(run, clock, self.dials.engine),
            spec,
            clock=clock,
            sleep=clock.sleep,
            cancel=cancel,
            on_progress=on_progress,
            on_measured=measured,
        )
        try:
            return runner.run(resume)
        finally:
            self.cost.load_s += clock.now_s
            self.cost.requests += run.sent
            self._clock = None

    def quality_baseline(self) -> object:
        """The simulator's text does not depend on the KV dtype: nothing to keep."""
        return None

    def quality_check(self, baseline: object, outcome: str) -> QualityResult:
        """Every token identical: the simulator's text does not depend on the KV dtype."""
        return QualityResult({"position_match_ratio": 1.0, "prompts_identical": 1}, 1.0)


@dataclass(frozen=True, slots=True)
class Cell:
    """One configuration swept by the grid: its operating point, goodput and that figure's
    standard error with the batches it came from (None where no step met the SLO)."""

    dials: Dials
    concurrency: int | None
    goodput_rps: float | None
    goodput_se_rps: float | None
    batches: int | None
    refused: str | None = None


def _goodput(
    replica: VirtualReplica, dials: Dials, sweep: SweepResult, spec: SweepSpec
) -> tuple[float | None, float | None, int | None]:
    """The goodput at a sweep's operating point, its standard error and batches (as tune's)."""
    point = operating_step(sweep)
    if point is None:
        return None, None, None
    records = replica.measured.get((dials, point.concurrency), ())
    targets = GoodputTargets(ttft_s=spec.slo.ttft_s, tpot_s=spec.slo.itl_s)
    end = point.started_at_s + point.measured_s
    spread = side_spread(records, point.started_at_s, end, (), targets, replicates=2)
    return point.goodput_rps, spread.goodput_rps, spread.batches


def run_grid(
    scenario: Scenario, *, seed: int = 0, restart_s: float = RESTART_S
) -> tuple[tuple[Cell, ...], Cost]:
    """Restart into every cell and sweep each as a tune candidate is swept (refined); the
    replica goes back to its starting dials at the end, which counts as a restart."""
    replica = VirtualReplica(scenario, seed=seed, restart_s=restart_s)
    cells = tuple(_sweep_cell(replica, dials) for dials in scenario.grid)
    if replica.dials != scenario.start:
        replica.apply(replica.dials, scenario.start)
    return cells, replica.cost


def resweep(
    scenario: Scenario, dials: Dials, seeds: Sequence[int], *, restart_s: float = RESTART_S
) -> tuple[Cell, ...]:
    """One configuration restarted into and swept as a grid cell is, once per seed: how far the
    operating point and its goodput move when the same sweep is only run again."""
    return tuple(
        _sweep_cell(VirtualReplica(scenario, seed=seed, restart_s=restart_s), dials)
        for seed in seeds
    )


def run_tune(
    scenario: Scenario, *, seed: int = 0, restart_s: float = RESTART_S
) -> tuple[TuneResult, Cost]:
    """The real `TuneRunner` from the scenario's starting dials, with the KV budget read as
    `slotop tune` reads it; it ends by putting the starting dials back (a restart)."""
    replica = VirtualReplica(scenario, seed=seed, restart_s=restart_s)
    runner = TuneRunner(
        replica,
        scenario.spec,
        replica.capacity(),
        scenario.start,
        URL,
        clock=replica.now,
    )
    return runner.run(), replica.cost


def _sweep_cell(replica: VirtualReplica, dials: Dials) -> Cell:
    """Restart the replica into `dials` and sweep them as a tune candidate is swept (refined)."""
    if dials != replica.dials:
        applied = replica.apply(replica.dials, dials)
        if applied.outcome != "applied":
            return Cell(dials, None, None, None, None, applied.lines[0])
    limits = ReplicaLimits(dials.max_num_seqs, dials.max_num_batched_tokens, dials.engine)
    spec = dataclasses.replace(replica.scenario.spec.sweep, refine=True, limits=limits)
    sweep = replica.sweep(spec, None, threading.Event(), _ignore, _ignore_step)
    rps, se, batches = _goodput(replica, dials, sweep, spec)
    return Cell(dials, sweep.recommendation.concurrency, rps, se, batches)


def best_cell(cells: Sequence[Cell]) -> Cell | None:
    """The grid's answer: the cell with the highest goodput at its operating point."""
    scored = [cell for cell in cells if cell.goodput_rps is not None]
    return max(scored, key=lambda cell: cell.goodput_rps or 0.0) if scored else None


def _ignore(_update: SweepProgress) -> None:
    pass


def _ignore_step(_step: StepResult, _records: Sequence[ProbeRecord]) -> None:
    pass
