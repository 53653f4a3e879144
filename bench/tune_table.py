"""The rows `bench_tune --scenarios` prints: tune and a full grid of its dials on each simulated
scenario in virtual time, each goodput with its noise band, and the issue's pass criteria.

A goodput's band is Student's t for its batches times its standard error (the batch means of
its step, as the tune estimates it); the band of the difference between the grid's best and the
tune's choice is the tune's own (`slotop.actions.restart.noise`): t for the fewer batches of the
two times the root of their squared errors.

That band is sampling noise at one concurrency. A sweep's operating point also moves from run to
run (a refine step at the edge of a stop rule lands one step up or down), and the grid's best is
the highest of many noisy cells. So the grid's best configuration is swept again with other seeds
(`repeats`), and the row says whether the tune's goodput lies within what that same configuration
measured when only run again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.noise import band_multiplier, difference_noise
from slotop.actions.tune.runner import TuneResult
from slotop.collectors.probe.resample import t_975
from tests.support.virtual_tune import (
    RESTART_S,
    Cell,
    Cost,
    Scenario,
    best_cell,
    resweep,
    run_grid,
    run_tune,
)

SHARE_MIN = 0.95
"""The share of the grid's best goodput the tune's choice must reach (or be within the noise)."""
RESTART_SHARE_MAX = 1 / 3
"""The most restarts the tune may spend, as a share of the grid's."""


def dials_words(dials: Dials | None) -> str:
    """A configuration in a few characters: `fp8 s64 b2048` (KV dtype, max_num_seqs, tokens)."""
    if dials is None:
        return "none"
    seqs = dials.max_num_seqs if dials.max_num_seqs is not None else "-"
    tokens = dials.max_num_batched_tokens if dials.max_num_batched_tokens is not None else "-"
    return f"{dials.kv_cache_dtype} s{seqs} b{tokens}"


def own_band(se_rps: float | None, batches: int | None) -> float | None:
    """The ± 95% half-width of one goodput: t for its batches times its standard error."""
    if se_rps is None or batches is None or batches < 2:
        return None
    return t_975(batches - 1) * se_rps


@dataclass(frozen=True, slots=True)
class Row:
    """One replica: the grid's best and its cost, the tune's choice and its cost."""

    name: str
    cells: tuple[Cell, ...]
    best: Cell | None
    grid_cost: Cost
    tune_dials: Dials | None
    tune_concurrency: int | None
    tune_goodput_rps: float | None
    tune_se_rps: float | None
    tune_batches: int | None
    tune_cost: Cost
    candidates: int
    restart_s: float | None
    """What one restart is priced at in virtual time (None: real time, restarts as measured)."""
    repeats: tuple[Cell, ...] = ()
    """The grid's best configuration swept again, once per other seed."""

    @property
    def repeat_goodputs(self) -> tuple[float, ...]:
        """The grid's best configuration's goodput at each of its sweeps (the grid's first)."""
        swept = [self.best, *self.repeats] if self.best is not None else []
        return tuple(c.goodput_rps for c in swept if c is not None and c.goodput_rps is not None)

    @property
    def within_repeats(self) -> bool | None:
        """Whether the tune's goodput is at least the lowest the grid's best configuration
        measured when swept again (None: not swept again)."""
        if len(self.repeat_goodputs) < 2 or self.tune_goodput_rps is None:
            return None
        return self.tune_goodput_rps >= min(self.repeat_goodputs)

    @property
    def share(self) -> float | None:
        """The tune's goodput over the grid's best."""
        if self.best is None or not self.best.goodput_rps or self.tune_goodput_rps is None:
            return None
        return self.tune_goodput_rps / self.best.goodput_rps

    @property
    def difference_band_rps(self) -> float | None:
        """The ± band of (grid best − tune's choice), as the tune judges two trials."""
        if self.best is None:
            return None
        multiplier = band_multiplier(self.best.batches, self.tune_batches)
        return difference_noise(self.best.goodput_se_rps, self.tune_se_rps, multiplier)

    @property
    def goodput_passes(self) -> bool:
        """At least 0.95 of the grid's best, or short of it by less than the difference's band."""
        share, band = self.share, self.difference_band_rps
        if share is None:
            return False
        if share >= SHARE_MIN:
            return True
        gap = (self.best.goodput_rps or 0.0) - (self.tune_goodput_rps or 0.0)  # type: ignore[union-attr]
        return band is not None and gap <= band

    @property
    def agrees(self) -> bool:
        """Tune chose the grid's best configuration, or its goodput is short of the best's by no
        more than the band of the difference."""
        if self.best is None or self.tune_goodput_rps is None:
            return False
        if self.tune_dials == self.best.dials:
            return True
        band = self.difference_band_rps
        return band is not None and (self.best.goodput_rps or 0.0) - self.tune_goodput_rps <= band

    @property
    def restarts_pass(self) -> bool:
        """At most a third of the grid's restarts."""
        return self.tune_cost.restarts <= RESTART_SHARE_MAX * self.grid_cost.restarts

    def to_json(self) -> dict[str, Any]:
        best = self.best
        return {
            "scenario": self.name,
            "time": "virtual" if self.restart_s is not None else "real",
            "restart_s": self.restart_s,
            "grid_cells": len(self.cells),
            "grid_best_config": best.dials.to_json() if best is not None else None,
            "grid_best_concurrency": best.concurrency if best is not None else None,
            "grid_best_goodput_rps": best.goodput_rps if best is not None else None,
            "grid_best_band_rps": (
                own_band(best.goodput_se_rps, best.batches) if best is not None else None
            ),
            "grid_restarts": self.grid_cost.restarts,
            "grid_requests": self.grid_cost.requests,
            "grid_seconds": self.grid_cost.seconds,
            "grid_load_seconds": self.grid_cost.load_s,
            "tune_config": self.tune_dials.to_json() if self.tune_dials is not None else None,
            "tune_concurrency": self.tune_concurrency,
            "tune_goodput_rps": self.tune_goodput_rps,
            "tune_band_rps": own_band(self.tune_se_rps, self.tune_batches),
            "tune_share_of_best": self.share,
            "difference_band_rps": self.difference_band_rps,
            "tune_candidates": self.candidates,
            "tune_restarts": self.tune_cost.restarts,
            "tune_requests": self.tune_cost.requests,
            "tune_seconds": self.tune_cost.seconds,
            "tune_load_seconds": self.tune_cost.load_s,
            "goodput_passes": self.goodput_passes,
            "grid_best_repeats": [
                {"concurrency": cell.concurrency, "goodput_rps": cell.goodput_rps}
                for cell in self.repeats
            ],
            "tune_within_grid_best_repeats": self.within_repeats,
            "agrees": self.agrees,
            "restarts_pass": self.restarts_pass,
            "cells": [
                {
                    "config": cell.dials.to_json(),
                    "concurrency": cell.concurrency,
                    "goodput_rps": cell.goodput_rps,
                    "band_rps": own_band(cell.goodput_se_rps, cell.batches),
                    "refused": cell.refused,
                }
                for cell in self.cells
            ],
        }


def tune_row(
    name: str,
    result: TuneResult,
    tune_cost: Cost,
    cells: tuple[Cell, ...],
    grid_cost: Cost,
    restart_s: float | None,
) -> Row:
    """The row of a tune's result (its choice, and its choice's error) beside a grid's cells."""
    choice = result.choice
    trial = result.trials[choice.trial] if choice.trial is not None else None
    return Row(
        name=name,
        cells=cells,
        best=best_cell(cells),
        grid_cost=grid_cost,
        tune_dials=choice.dials,
        tune_concurrency=choice.concurrency,
        tune_goodput_rps=choice.goodput_rps,
        tune_se_rps=trial.goodput_se_rps if trial is not None else None,
        tune_batches=trial.goodput_batches if trial is not None else None,
        tune_cost=tune_cost,
        candidates=len(result.trials) - 1,
        restart_s=restart_s,
    )


def measure(
    scenario: Scenario, *, seed: int = 0, restart_s: float = RESTART_S, repeats: int = 0
) -> Row:
    """Tune, then the full grid, on the scenario in virtual time; then the grid's best
    configuration swept `repeats` times more, each with a seed of its own."""
    result, tune_cost = run_tune(scenario, seed=seed, restart_s=restart_s)
    cells, grid_cost = run_grid(scenario, seed=seed, restart_s=restart_s)
    row = tune_row(scenario.name, result, tune_cost, cells, grid_cost, restart_s)
    if repeats > 0 and row.best is not None:
        seeds = range(seed + 1, seed + 1 + repeats)
        row = replace(row, repeats=resweep(scenario, row.best.dials, seeds, restart_s=restart_s))
    return row


def _rps(value: float | None, band: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:.2f} ± {band:.2f}" if band is not None else f"{value:.2f} ± ?"


def table(rows: list[Row]) -> str:
    """The grid's best beside the tune's choice, one line each per scenario, then the criteria."""
    head = (
        f"{'scenario':<13} {'search':<5} {'config':<15} {'conc':>5} {'goodput req/s':>15} "
        f"{'share':>6} {'restarts':>8} {'requests':>9} {'seconds':>8}"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        best = row.best
        lines.append(
            f"{row.name:<13} {'grid':<5} "
            f"{dials_words(best.dials if best else None):<15} "
            f"{(best.concurrency if best and best.concurrency else 0):>5} "
            f"{_rps(best.goodput_rps if best else None, own_band(best.goodput_se_rps, best.batches) if best else None):>15} "
            f"{'1.00':>6} {row.grid_cost.restarts:>8} {row.grid_cost.requests:>9,} "
            f"{row.grid_cost.seconds:>8,.0f}"
        )  # fmt: skip
        share = f"{row.share:.2f}" if row.share is not None else "-"
        lines.append(
            f"{'':<13} {'tune':<5} {dials_words(row.tune_dials):<15} "
            f"{row.tune_concurrency or 0:>5} "
            f"{_rps(row.tune_goodput_rps, own_band(row.tune_se_rps, row.tune_batches)):>15} "
            f"{share:>6} {row.tune_cost.restarts:>8} {row.tune_cost.requests:>9,} "
            f"{row.tune_cost.seconds:>8,.0f}"
        )
    lines.append("")
    lines.append(
        f"pass: tune's goodput ≥ {SHARE_MIN:.2f} of the grid's best, or short of it by less than "
        f"the band of the difference; tune's restarts ≤ 1/3 of the grid's"
    )
    for row in rows:
        band = row.difference_band_rps
        gap = (
            (row.best.goodput_rps or 0.0) - (row.tune_goodput_rps or 0.0)
            if row.best is not None
            else None
        )
        gap_words = (
            f"gap {gap:+.2f} ± {band:.2f} req/s"
            if gap is not None and band is not None
            else "gap ?"
        )
        lines.append(
            f"  {row.name:<13} goodput {'pass' if row.goodput_passes else 'MISS'} "
            f"({gap_words}); restarts {'pass' if row.restarts_pass else 'MISS'} "
            f"({row.tune_cost.restarts} of {row.grid_cost.restarts}, "
            f"{row.candidates} candidates); time tune/grid "
            f"{row.tune_cost.seconds / row.grid_cost.seconds:.2f}"
        )
        if row.within_repeats is not None and row.best is not None:
            points = [c.concurrency for c in (row.best, *row.repeats) if c.concurrency]
            rates = row.repeat_goodputs
            lines.append(
                f"  {'':<13} the grid's best ({dials_words(row.best.dials)}), its sweep and "
                f"{len(row.repeats)} more with other seeds: concurrency "
                f"{min(points)}–{max(points)}, goodput {min(rates):.2f}–{max(rates):.2f} req/s; "
                f"tune's {row.tune_goodput_rps:.2f} is "
                f"{'within' if row.within_repeats else 'below'} that"
            )
    return "\n".join(lines)
