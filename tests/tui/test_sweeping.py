"""The sweep's one-line progress in the dashboard: warming up, measuring, waiting for the last requests."""

from __future__ import annotations

import pytest

from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepProgress, SweepResult
from slotop.slo import Slo
from slotop.tui.sweeping import progress_words, sweep_points
from tests.support.sweep_steps import flat_step


@pytest.mark.parametrize(
    ("phase", "elapsed_s", "ok", "words"),
    [
        ("warmup", 2.0, 0, "sweep step 2/5: concurrency 4, warming up"),
        ("dwell", 12.0, 34, "sweep step 2/5: concurrency 4, 12/20 s, 34/50 requests"),
        (
            "follow",
            21.0,
            40,
            "sweep step 2/5: concurrency 4, measured; waiting for the dwell's last requests "
            "to end (40 ended)",
        ),
    ],
)
def test_progress_words_name_the_phase(phase: str, elapsed_s: float, ok: int, words: str) -> None:
    progress = SweepProgress(2, 5, 4, phase, elapsed_s, ok, 50, 20.0)  # type: ignore[arg-type]
    assert progress_words(progress, None) == words


def test_no_sweep_says_nothing() -> None:
    assert progress_words(None, None) == ""


def _step(concurrency: int, requests_ok: int, sampled: bool) -> StepResult:
    return flat_step(
        concurrency=concurrency,
        started_at_s=0.0,
        measured_s=20.0,
        requests_ok=requests_ok,
        requests_failed=0,
        min_requests_met=sampled,
        ttft_slo_s=0.1,
        itl_slo_s=0.01,
    )


def test_an_under_sampled_sweep_step_is_not_a_point_on_the_curve() -> None:
    spec = SweepSpec(plan=(1, 2, 4), slo=Slo(ttft_s=0.5, itl_s=0.04), min_requests=50)
    steps = (_step(1, 60, True), _step(2, 12, False), _step(4, 80, True))
    points = sweep_points(SweepResult("http://127.0.0.1:8000", 0.0, spec, steps))
    assert [(p.concurrency, p.requests) for p in points] == [(1, 60), (4, 80)]
