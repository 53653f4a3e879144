"""Histogram quantiles and counter increases, against hand-computed Prometheus results and numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotop.collectors.histograms import (
    counter_increase,
    histogram_quantile,
    quantile_estimate,
    step_increase,
)

INF = math.inf
# Cumulative counts: 10 observations ≤ 0.1, 20 more in (0.1, 0.2], 10 in (0.2, 0.5], none above.
A = [(0.1, 10.0), (0.2, 30.0), (0.5, 40.0), (INF, 40.0)]

# Each expected value is worked by hand with PromQL's rule: rank = q × total; take the first
# bucket whose cumulative count reaches the rank; interpolate linearly between its bounds (0 as
# the lower bound of a first bucket with a positive upper bound).
PROMETHEUS_CASES = [
    pytest.param(0.5, A, 0.15, id="rank 20 in (0.1,0.2]: 0.1+0.1*(10/20)"),
    pytest.param(0.25, A, 0.1, id="rank 10 ends the first bucket: 0+0.1*(10/10)"),
    pytest.param(0.9, A, 0.38, id="rank 36 in (0.2,0.5]: 0.2+0.3*(6/10)"),
    pytest.param(1.0, A, 0.5, id="q=1 is the top of the last non-empty finite bucket"),
    pytest.param(0.0, A, 0.0, id="q=0 is the lower bound 0"),
    pytest.param(-0.1, A, -INF, id="q<0 is -Inf"),
    pytest.param(1.1, A, INF, id="q>1 is +Inf"),
    pytest.param(
        0.5, [(0.1, 1.0), (0.2, 2.0), (INF, 10.0)], 0.2, id="rank in +Inf bucket: last finite bound"
    ),
    pytest.param(0.5, [(0.1, 0.0), (INF, 0.0)], math.nan, id="no observations: NaN"),
    pytest.param(0.5, [(0.1, 5.0), (0.2, 10.0)], math.nan, id="no +Inf bucket: NaN"),
    pytest.param(0.5, [(INF, 5.0)], math.nan, id="+Inf bucket only: NaN"),
    pytest.param(
        0.1, [(-1.0, 2.0), (0.0, 4.0), (1.0, 8.0), (INF, 8.0)], -1.0, id="first bound ≤ 0 returned"
    ),
    pytest.param(
        0.5, [(-1.0, 2.0), (0.0, 4.0), (1.0, 8.0), (INF, 8.0)], 0.0, id="rank 4 in (-1,0]: -1+1*1"
    ),
    pytest.param(0.25, [(0.0, 3.0), (1.0, 6.0), (INF, 6.0)], 0.0, id="first bound 0 returned"),
    pytest.param(
        0.75,
        [(0.1, 10.0), (0.2, 5.0), (0.5, 20.0), (INF, 20.0)],
        0.35,
        id="non-monotonic made [10,10,20]: rank 15 → 0.2+0.3*(5/10)",
    ),
    pytest.param(
        0.5, [(0.1, 2.0), (0.1, 3.0), (0.2, 10.0), (INF, 10.0)], 0.1, id="equal bounds coalesce"
    ),
    pytest.param(
        0.5, [(INF, 40.0), (0.2, 30.0), (0.1, 10.0), (0.5, 40.0)], 0.15, id="any bucket order"
    ),
    pytest.param(
        0.0, [(0.1, 0.0), (0.2, 5.0), (INF, 5.0)], math.nan, id="q=0 on an empty first bucket: 0/0"
    ),
]


@pytest.mark.parametrize(("q", "buckets", "expected"), PROMETHEUS_CASES)
def test_histogram_quantile_matches_prometheus(
    q: float, buckets: list[tuple[float, float]], expected: float
) -> None:
    result = histogram_quantile(q, buckets)
    if math.isnan(expected):
        assert math.isnan(result)
    else:
        assert result == pytest.approx(expected, abs=1e-12)


def test_nan_quantile_is_nan() -> None:
    assert math.isnan(histogram_quantile(math.nan, A))


def test_estimate_carries_bucket_and_count() -> None:
    estimate = quantile_estimate(0.9, A)
    assert estimate is not None
    assert (estimate.bucket_lower, estimate.bucket_upper) == (0.2, 0.5)
    assert estimate.bucket_width == pytest.approx(0.3)
    assert estimate.observations == 40.0
    assert not estimate.clamped


def test_estimate_in_overflow_bucket_is_clamped_with_no_width() -> None:
    estimate = quantile_estimate(0.99, [(0.01, 1.0), (0.025, 2.0), (INF, 100.0)])
    assert estimate is not None
    assert estimate.clamped and estimate.value == 0.025
    assert estimate.bucket_width is None


def test_forced_monotonic_is_reported_and_float_noise_is_not() -> None:
    forced = quantile_estimate(0.75, [(0.1, 10.0), (0.2, 5.0), (0.5, 20.0), (INF, 20.0)])
    noise = quantile_estimate(0.75, [(0.1, 100.0), (0.2, 100.0 - 1e-11), (INF, 200.0)])
    assert forced is not None and forced.forced_monotonic
    assert noise is not None and not noise.forced_monotonic


def test_estimate_refuses_quantiles_outside_zero_one() -> None:
    with pytest.raises(ValueError):
        quantile_estimate(1.5, A)


TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0)


def _cumulative(samples: np.ndarray, bounds: tuple[float, ...]) -> list[tuple[float, float]]:
    counts = [(bound, float(np.count_nonzero(samples <= bound))) for bound in bounds]
    return [*counts, (INF, float(samples.size))]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("q", [0.5, 0.9, 0.95, 0.99])
def test_estimate_brackets_numpy_quantile(seed: int, q: float) -> None:
    """The exact quantile (the sample at rank ⌈q·n⌉) lies in the bucket the estimate names.

    So the estimate is off by at most that bucket's width: the interpolation error.
    """
    rng = np.random.default_rng(seed)
    samples = rng.lognormal(mean=-2.5, sigma=0.8, size=int(rng.integers(50, 5000)))
    estimate = quantile_estimate(q, _cumulative(samples, TTFT_BOUNDS))
    exact = float(np.quantile(samples, q, method="inverted_cdf"))
    assert estimate is not None
    if estimate.clamped:
        assert exact > estimate.bucket_lower
    else:
        assert estimate.bucket_lower < exact <= estimate.bucket_upper
        assert estimate.bucket_width is not None
        assert abs(estimate.value - exact) <= estimate.bucket_width


@pytest.mark.parametrize("seed", range(4))
def test_fine_buckets_on_uniform_data_track_numpy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    samples = rng.uniform(0.0, 1.0, size=20_000)
    bounds = tuple(round(0.01 * i, 2) for i in range(1, 101))
    buckets = _cumulative(samples, bounds)
    for q in (0.1, 0.5, 0.9, 0.99):
        assert histogram_quantile(q, buckets) == pytest.approx(np.quantile(samples, q), abs=0.01)


INCREASE_CASES = [
    pytest.param([1.0, 2.0, 3.0], 2.0, id="steady growth"),
    pytest.param([5.0, 3.0], 3.0, id="reset: the value after it is the increase"),
    pytest.param([10.0, 12.0, 2.0, 5.0], 7.0, id="2 before, 2 at the reset, 3 after"),
    pytest.param([3.0, 0.0], 0.0, id="reset to zero adds nothing"),
    pytest.param([0.0, 0.0], 0.0, id="flat"),
    pytest.param([4.0], 0.0, id="one reading"),
    pytest.param([], 0.0, id="no reading"),
]


@pytest.mark.parametrize(("values", "expected"), INCREASE_CASES)
def test_counter_increase(values: list[float], expected: float) -> None:
    assert counter_increase(values) == expected


@given(st.lists(st.floats(min_value=0, max_value=1e12, allow_nan=False)))
def test_counter_increase_is_never_negative(values: list[float]) -> None:
    assert counter_increase(values) >= 0


def test_step_increase() -> None:
    assert step_increase(5.0, 8.0) == 3.0
    assert step_increase(8.0, 5.0) == 5.0


# 985 of 1000 requests at ≤ 250 ms and 15 at 490 ms: rank 990 falls 5/15 into (0.25, 0.5].
STRADDLING = [(0.1, 0.0), (0.25, 985.0), (0.5, 1000.0), (1.0, 1000.0), (math.inf, 1000.0)]


def test_a_p99_interpolated_under_the_target_is_undecided_when_its_bucket_holds_it() -> None:
    estimate = quantile_estimate(0.99, STRADDLING)
    assert estimate is not None
    # 0.3333 s, yet the true p99 is 0.49 s.
    assert estimate.value == pytest.approx(0.25 + 0.25 * 5 / 15)
    assert (estimate.bucket_lower, estimate.bucket_upper) == (0.25, 0.5)
    assert estimate.bucket_within(0.35) is None  # 350 ms lies inside (0.25, 0.5]
    assert estimate.bucket_within(0.5) is True  # `le` is inclusive: every value is ≤ 0.5
    assert estimate.bucket_within(0.6) is True
    assert estimate.bucket_within(0.25) is False  # every value in the bucket is > 0.25
    assert estimate.bucket_within(0.2) is False


def test_a_clamped_quantiles_bucket_runs_to_infinity() -> None:
    estimate = quantile_estimate(0.99, [(0.5, 10.0), (1.0, 20.0), (math.inf, 100.0)])
    assert estimate is not None and estimate.clamped
    assert estimate.bucket_within(1.0) is False  # all above the last finite bound
    assert estimate.bucket_within(0.8) is False
    assert estimate.bucket_within(5.0) is None  # the +Inf bucket holds 5 s and more
