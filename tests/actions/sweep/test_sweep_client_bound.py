"""A sweep step whose numbers the probe's own lag bent: measured, marked in the table, kept in JSON."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slotop.actions.sweep.codec import sweep_from_json, sweep_to_json
from slotop.actions.sweep.decide import recommend
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult
from slotop.actions.sweep.step import measure_step
from slotop.actions.sweep.table import format_sweep_text
from slotop.slo import Slo
from tests.support.lagged import stamped
from tests.support.sweep_steps import flat_step

SLO = Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=90.0, itl_percentile=99.0)
SPEC = SweepSpec(plan=(2, 4), slo=SLO, warmup_s=0.0, dwell_s=10.0, min_requests=10)


def test_a_step_measures_what_its_lag_added_at_the_slo_s_percentiles() -> None:
    rng = np.random.default_rng(3)
    records = []
    truth_gaps: list[float] = []
    seen_gaps: list[float] = []
    truth_ttfts: list[float] = []
    seen_ttfts: list[float] = []
    for request_id in range(80):
        sent = request_id * 0.1
        arrivals = list(sent + 0.05 + 0.02 * np.arange(12))
        lags = list(rng.uniform(0.0, 0.0002, 12))
        if request_id % 4 == 0:
            lags[5] += 0.006  # a chunk in every fourth request waited 6 ms in the socket
        records.append(stamped(request_id, sent, arrivals, lags))
        truth_gaps += list(np.diff(arrivals))
        seen_gaps += list(np.diff(np.add(arrivals, lags)))
        truth_ttfts.append(arrivals[0] - sent)
        seen_ttfts.append(arrivals[0] + lags[0] - sent)
    step = measure_step(4, records, 0.0, 10.0, SPEC)
    assert step.client.itl_error_s == pytest.approx(
        np.percentile(seen_gaps, 99) - np.percentile(truth_gaps, 99)
    )
    assert step.client.ttft_error_s == pytest.approx(
        np.percentile(seen_ttfts, 90) - np.percentile(truth_ttfts, 90)
    )
    assert step.client.itl_error_s is not None and step.client.itl_error_s > 0.001
    assert step.client.lag_p99_s is not None and step.client.lag_p99_s > 0.001


def test_a_step_without_arrival_times_says_nothing_of_the_client() -> None:
    record = dataclasses.replace(stamped(0, 1.0, [1.05, 1.07], [0.0, 0.0]), lag_s=None)
    step = measure_step(2, [record], 0.0, 10.0, SPEC)
    assert (step.client.ttft_error_s, step.client.itl_error_s, step.client.lag_p99_s) == (
        None,
        None,
        None,
    )


def step_result(concurrency: int, **client: float | None) -> StepResult:
    return flat_step(
        concurrency=concurrency,
        started_at_s=10.0 * concurrency,
        measured_s=10.0,
        requests_ok=40,
        requests_failed=0,
        min_requests_met=True,
        ttft_p50_s=0.1,
        ttft_slo_s=0.2,
        itl_p50_s=0.02,
        itl_slo_s=0.03,
        output_tokens_per_s=100.0 * concurrency,
        requests_per_s=float(concurrency),
        **client,
    )


def sweep(*steps: StepResult) -> SweepResult:
    return SweepResult(
        url="http://127.0.0.1:8000/v1/completions",
        started_at_s=1.0,
        settings=SPEC,
        steps=steps,
        stop=None,
        recommendation=recommend(steps, SPEC.slo, SPEC.rules, SPEC.limits),
    )


KEPT_UP = step_result(2, client_ttft_error_s=0.0001, client_itl_error_s=0.0004)
BENT = step_result(
    4, client_ttft_error_s=0.0002, client_itl_error_s=0.0031, client_lag_p99_s=0.0025
)


def test_the_table_marks_a_bent_step_s_client_numbers_and_says_by_how_much() -> None:
    text = format_sweep_text(sweep(KEPT_UP, BENT))
    rows = {line.split()[0]: line for line in text.splitlines() if line.strip()[:1].isdigit()}
    assert "~" not in rows["2"]
    assert rows["4"].count("~") == 4  # TTFT p50 and p90, ITL p50 and p99
    assert (
        "~ concurrency 4: bent by the client: the client added TTFT p90 +0.20 ms, "
        "ITL p99 +3.10 ms (chunk lag p99 2.50 ms) (over 1 ms)"
    ) in text
    assert "concurrency 2: bent" not in text


def test_the_json_says_which_steps_were_bent_and_reads_back_their_figures() -> None:
    data = sweep_to_json(sweep(KEPT_UP, BENT))
    assert [row["client_bound"] for row in data["steps"]] == [False, True]
    assert data["steps"][1]["client_itl_error_s"] == 0.0031
    again = sweep_from_json(data)
    assert again.steps == (KEPT_UP, BENT)
    for row in data["steps"]:  # a sweep file from before the probe measured its lag
        for key in ("client_ttft_error_s", "client_itl_error_s", "client_lag_p99_s"):
            del row[key]
    older = sweep_from_json(data)
    assert [s.client.itl_error_s for s in older.steps] == [None, None]
    assert "~" not in format_sweep_text(older)
