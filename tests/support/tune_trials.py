"""Tune trials and budgets built by hand, for the tune's pure rules and its report."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from slotop.actions.replica.spec import Dials
from slotop.actions.sweep.decide import ReplicaLimits, StopReason, StopRules, recommend
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult
from slotop.actions.tune.capacity import Capacity, DtypeCapacity
from slotop.actions.tune.model import Move, Trial, TuneSpec
from tests.support.sweep_steps import SLO

SPEC = SweepSpec(plan=(1, 2, 4, 8, 16), slo=SLO, refine=True)
TUNE = TuneSpec(
    sweep=SPEC,
    dials=frozenset({"kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens"}),
    budget_s=3600.0,
    max_candidates=4,
    quality_min_match_ratio=0.9,
)

CAPACITY = Capacity(
    current_dtype="auto",
    block_size_tokens=16,
    max_model_len_tokens=2048,
    load_tokens=1056,
    rows=(
        DtypeCapacity("auto", 2, 131072, 4608, 2.25, 4.36),
        DtypeCapacity("bfloat16", 2, 131072, 4608, 2.25, 4.36),
        DtypeCapacity("fp8", 1, 65536, 9216, 4.5, 8.73),
    ),
)
"""A cache of 4,608 tokens at 16 bits: 2.25 sequences of 2,048 tokens, 4.36 of the load's 1,056
(66 blocks each of 288); fp8 doubles both."""


def sweep_of(steps: Sequence[StepResult], dials: Dials) -> SweepResult:
    """A finished sweep of these steps at these dials, its recommendation by the sweep's rules."""
    limits = ReplicaLimits(dials.max_num_seqs, dials.max_num_batched_tokens, dials.engine)
    return SweepResult(
        "http://127.0.0.1:8000/v1/completions",
        0.0,
        dataclasses.replace(SPEC, limits=limits),
        tuple(steps),
        StopReason.SLO_BROKEN,
        recommend(steps, SLO, StopRules(), limits),
    )


def trial(
    number: int,
    dials: Dials,
    steps: Sequence[StepResult],
    goodput_rps: float | None,
    se_rps: float | None = 0.5,
    *,
    batches: int = 10,
    move: Move = Move.BASELINE,
    rejected: str | None = None,
) -> Trial:
    """A measured configuration with its goodput at the operating point and that figure's error,
    from `batches` batches (ten: Student's t of 2.262 for its band)."""
    return Trial(
        number,
        dials,
        move,
        "",
        sweep_of(steps, dials),
        goodput_rps=goodput_rps,
        goodput_se_rps=se_rps,
        goodput_batches=batches,
        restart="none" if number == 0 else "applied",
        rejected=rejected,
    )
