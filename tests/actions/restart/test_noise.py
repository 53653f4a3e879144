"""Run-to-run noise: hand-worked counts, batches, spreads and t points, and numpy-drawn samples
where two draws of one distribution stay within the noise and a clear shift clears it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from slotop.actions.restart.noise import (
    Noise,
    NoiseMethod,
    band_multiplier,
    batch_edges,
    batch_means_se,
    batch_of,
    counts_p_value,
    difference_noise,
    side_spread,
    tail_is_thin,
)
from slotop.collectors.probe.records import ErrorClass, ProbeRecord
from slotop.collectors.probe.resample import (
    cluster_draws,
    cluster_percentile_se,
    cluster_share_se,
    percentile_replicates,
    t_975,
    weighted_percentile,
)
from slotop.slo import GoodputTargets


def record(
    sent_s: float,
    ttft_s: float,
    gaps_s: tuple[float, ...] = (),
    error: ErrorClass | None = None,
) -> ProbeRecord:
    e2e = ttft_s + sum(gaps_s)
    return ProbeRecord(
        request_id=int(sent_s * 1000),
        step=0,
        sent_at_s=sent_s,
        done_at_s=sent_s + e2e,
        in_flight_at_send=1,
        planned_prompt_tokens=8,
        planned_output_tokens=len(gaps_s) + 1,
        ttft_s=None if error else ttft_s,
        itl_s=() if error else gaps_s,
        e2e_s=None if error else e2e,
        chunk_count=0 if error else len(gaps_s) + 1,
        prompt_tokens=8,
        output_tokens=None if error else len(gaps_s) + 1,
        finish_reason=None if error else "length",
        error=error,
    )


# Counts: given n = k1 + k2 in spans t1, t2, k2 ~ binomial(n, t2 / (t1 + t2)) under equal rates.
@pytest.mark.parametrize(
    ("before", "span_before", "after", "span_after", "p_value"),
    [
        (0, 10.0, 5, 10.0, 2 * 0.5**5),  # 0.0625: not beyond
        (0, 10.0, 6, 10.0, 2 * 0.5**6),  # 0.03125: beyond
        (3, 10.0, 3, 10.0, 1.0),
        (0, 10.0, 0, 10.0, 1.0),
        # p = 3/4; P(4) = 0.31640625, P(0) = 0.00390625, P(1) = 0.046875, P(2) = 0.2109375 are
        # no likelier; P(3) = 0.421875 is: 0.578125
        (0, 10.0, 4, 30.0, 0.578125),
    ],
)
def test_counts_test_by_hand(
    before: int, span_before: float, after: int, span_after: float, p_value: float
) -> None:
    assert counts_p_value(before, span_before, after, span_after) == pytest.approx(p_value)


def test_counts_without_a_span_have_no_p_value() -> None:
    assert counts_p_value(1, 0.0, 2, 10.0) is None


@pytest.mark.parametrize(
    ("noise", "delta", "beyond"),
    [
        (Noise(NoiseMethod.COUNTS, p_value=0.0625), 5.0, False),
        (Noise(NoiseMethod.COUNTS, p_value=0.03125), 6.0, True),
        (Noise(NoiseMethod.COUNTS), 6.0, None),
        (Noise(NoiseMethod.EXACT), 768.0, True),
        (Noise(NoiseMethod.EXACT), 0.0, False),
        (Noise(NoiseMethod.BOOTSTRAP, half_width=9.8), -9.9, True),
        (Noise(NoiseMethod.BOOTSTRAP, half_width=9.8), 9.8, False),
        (Noise(NoiseMethod.BATCH_MEANS), 1.0, None),
    ],
)
def test_beyond_noise(noise: Noise, delta: float, beyond: bool | None) -> None:
    assert noise.beyond(delta) is beyond


# Student's t 97.5% points from a printed table (Fisher & Yates): 12.706, 2.776, 2.262, 2.086, 2.042.
@pytest.mark.parametrize(
    ("degrees", "point"), [(1, 12.706), (4, 2.776), (9, 2.262), (20, 2.086), (30, 2.042)]
)
def test_t_points(degrees: int, point: float) -> None:
    assert t_975(degrees) == pytest.approx(point, abs=0.005)


def test_the_band_takes_the_side_with_fewer_batches() -> None:
    assert band_multiplier(10, 5) == pytest.approx(2.776)
    assert band_multiplier(None, 5) is None
    assert difference_noise(3.0, 4.0) == pytest.approx(1.96 * 5.0)
    assert difference_noise(3.0, 4.0, 2.776) == pytest.approx(2.776 * 5.0)
    assert difference_noise(None, 4.0) is None
    assert difference_noise(3.0, 4.0, None) is None


def test_batches_by_hand() -> None:
    # 30 s with a 1 s cycle: batches of at least 2 s, at most 10 of them: 10 of 3 s.
    assert batch_edges(0.0, 30.0, 1.0) == [(3.0 * i, 3.0 * (i + 1)) for i in range(10)]
    # 10 s with a 1.5 s cycle: at least 3 s each, so 3 batches of 10/3 s.
    edges = batch_edges(0.0, 10.0, 1.5)
    assert len(edges) == 3 and edges[-1][1] == pytest.approx(10.0)
    assert batch_edges(0.0, 10.0, None) == [(0.0, 10.0)]
    assert batch_edges(5.0, 5.0, 1.0) == []
    assert [batch_of(t, edges) for t in (0.0, 3.3, 3.4, 9.9, 10.0)] == [0, 0, 1, 2, 2]
    # 1, 2, 3, 4: variance (2.25 + 0.25 + 0.25 + 2.25) / 3 = 5/3; se = √(5/3) / √4
    assert batch_means_se([1.0, 2.0, 3.0, 4.0]) == pytest.approx(math.sqrt(5 / 3) / 2)
    assert batch_means_se([7.0]) is None


def test_a_tail_is_thin_below_two_samples_above_it() -> None:
    assert tail_is_thin(199, 99.0) and not tail_is_thin(200, 99.0)
    assert tail_is_thin(19, 90.0) and not tail_is_thin(20, 90.0)
    assert not tail_is_thin(4, 50.0)


def test_weighted_percentile_is_numpys_on_the_repeated_array() -> None:
    rng = np.random.default_rng(7)
    values = np.sort(rng.gamma(2.0, 0.05, size=40))
    for _ in range(20):
        weights = rng.integers(0, 4, size=values.size)
        weights[rng.integers(values.size)] += 1  # never all zero
        repeated = np.repeat(values, weights)
        for percentile in (0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0):
            assert weighted_percentile(values, weights, percentile) == pytest.approx(
                float(np.percentile(repeated, percentile)), rel=1e-12
            )


@pytest.mark.parametrize(
    ("samples", "clusters"),
    [(3000, 12), (3000, 400), (20000, 150), (300, 300), (70, 5)],
    ids=["batches", "requests' gaps", "many gaps", "one a cluster", "few"],
)
def test_replicates_are_weighted_percentiles_of_each_draw_exactly(
    samples: int, clusters: int
) -> None:
    # the block search (most shapes) and the running sums (one sample a cluster) give the very
    # numbers `weighted_percentile` gives replicate by replicate, ties and zero weights included
    rng = np.random.default_rng(samples + clusters)
    values = np.round(rng.lognormal(0.0, 1.0, samples), 2)
    owner = np.arange(samples) % clusters
    rng.shuffle(owner)
    percentiles = (0.0, 37.5, 50.0, 99.0, 100.0)
    found = percentile_replicates(
        values.tolist(), (owner * 3 + 1).tolist(), percentiles, replicates=300, seed=5
    )
    assert found is not None and found.values.shape == (300, len(percentiles))
    order = np.argsort(values, kind="stable")
    draws = cluster_draws(clusters, 300, 5)
    for row, counts in enumerate(draws):
        weights = counts[owner[order]]
        for column, percentile in enumerate(percentiles):
            assert found.values[row, column] == weighted_percentile(
                values[order], weights, percentile
            )


def test_the_cluster_bootstrap_median_error_is_the_normal_theory_one() -> None:
    # The median of n normal draws has a standard error of about √(π/2)·σ/√n; clusters of one
    # value each are plain requests.
    samples = np.random.default_rng(11).normal(0.2, 0.05, size=400)
    (se,) = cluster_percentile_se(samples.tolist(), list(range(400)), (50.0,))
    assert se == pytest.approx(math.sqrt(math.pi / 2) * 0.05 / math.sqrt(400), rel=0.25)


def test_the_cluster_bootstrap_of_a_mean_like_statistic_by_hand() -> None:
    # Two clusters, all of one holding 0 and all of the other 1, ten values each: a replicate's
    # median is 0, 0.5 or 1 with chances 1/4, 1/2, 1/4: sd √(1/8); times √(2/1) for two clusters: 0.5.
    values = [0.0] * 10 + [1.0] * 10
    (se,) = cluster_percentile_se(values, [0] * 10 + [1] * 10, (50.0,), replicates=20000)
    assert se == pytest.approx(0.5, rel=0.03)


def test_the_cluster_share_error_is_the_binomial_one() -> None:
    flags = [True] * 30 + [False] * 70
    se = cluster_share_se(flags, list(range(100)))
    assert se == pytest.approx(math.sqrt(0.3 * 0.7 / 100), rel=0.1)
    assert cluster_share_se([True, False], [0, 0]) is None


def test_values_that_move_together_are_drawn_together() -> None:
    # Forty clusters, each one value ten times: pooled, they are worth forty samples, not four
    # hundred, so the error is that of the forty values alone (up to the √(k/(k−1)) of k clusters).
    per_cluster = np.random.default_rng(3).gamma(2.0, 0.01, size=40).tolist()
    alone = cluster_percentile_se(per_cluster, list(range(40)), (50.0, 90.0))
    pooled = cluster_percentile_se(
        [g for g in per_cluster for _ in range(10)],
        [c for c in range(40) for _ in range(10)],
        (50.0, 90.0),
    )
    assert pooled == pytest.approx(alone)
    as_if_independent = cluster_percentile_se(
        [g for g in per_cluster for _ in range(10)], list(range(400)), (50.0, 90.0)
    )
    for independent, grouped in zip(as_if_independent, pooled, strict=True):
        assert independent is not None and grouped is not None
        assert independent == pytest.approx(grouped / math.sqrt(10), rel=0.25)


def test_one_cluster_gives_no_error() -> None:
    assert cluster_percentile_se([0.1, 0.2], [0, 0], (50.0, 99.0)) == (None, None)
    assert cluster_percentile_se([], [], (50.0,)) == (None,)


def test_a_side_rate_spread_by_hand() -> None:
    # Requests of 0.5 s (their cycle) in (0, 10]: batches of at least 1 s, so ten of 1 s. Two
    # requests in each even second, none in the odd ones: rates 2, 0, 2, 0, …; their sd is √(10/9)
    # and the error √(10/9) / √10 = 1/3 request/s.
    records = [record(s + d, 0.5) for s in (0.0, 2.0, 4.0, 6.0, 8.0) for d in (0.2, 0.4)]
    spread = side_spread(records, 0.0, 10.0, (50.0,), None)
    assert spread.batches == 10 and spread.batch_s == pytest.approx(1.0)
    assert spread.request_rate_rps == pytest.approx(1 / 3)
    assert spread.goodput_rps is None and spread.goodput_ratio is None
    steady = [record(s + 0.5, 0.5) for s in range(10)]
    assert side_spread(steady, 0.0, 10.0, (50.0,), None).request_rate_rps == pytest.approx(0.0)


def test_a_side_of_long_requests_is_too_short_to_cut() -> None:
    # Requests of 3 s in a 10 s side: batches of at least 6 s, one of them: no error at all.
    records = [record(float(s), 3.0) for s in range(10)]
    spread = side_spread(records, 0.0, 10.0, (50.0,), None)
    assert spread.batches is None and spread.latency("ttft", 50.0) is None


def test_a_side_spread_counts_only_the_requests_sent_in_its_span() -> None:
    inside = [record(0.5 + i, 0.1 * (i + 1), (0.02,) * 3) for i in range(10)]
    outside = [record(20.0, 9.0, (5.0,) * 3)]
    targets = GoodputTargets(ttft_s=0.45)
    spread = side_spread([*inside, *outside], 0.0, 10.0, (50.0, 99.0), targets)
    # End-to-end 0.16 to 1.06 s, median 0.61 s: batches of at least 1.22 s, so eight of 1.25 s;
    # the requests sent at 0.5, 1.5, …, 9.5 s fall in batches 0 1 2 2 3 4 5 6 6 7.
    assert spread.batches == 8 and spread.batch_s == pytest.approx(1.25)
    batches = [0, 1, 2, 2, 3, 4, 5, 6, 6, 7]
    (ttft50, _) = cluster_percentile_se([0.1 * (i + 1) for i in range(10)], batches, (50.0, 99.0))
    assert spread.latency("ttft", 50.0) == pytest.approx(ttft50)
    assert spread.latency("itl", 99.0) == pytest.approx(0.0)  # every gap is 20 ms
    assert spread.goodput_ratio == cluster_share_se([i < 4 for i in range(10)], batches)
    assert spread.is_thin("ttft", 99.0) and spread.is_thin("itl", 99.0)
    assert not spread.is_thin("ttft", 50.0)


def _side_noise(
    kind: str, before: list[ProbeRecord], after: list[ProbeRecord], percentile: float
) -> float | None:
    spreads = [
        side_spread(side, 0.0, 100.0, (percentile,), None, replicates=200)
        for side in (before, after)
    ]
    multiplier = band_multiplier(spreads[0].batches, spreads[1].batches)
    return difference_noise(*(s.latency(kind, percentile) for s in spreads), multiplier)


def _requests(rng: np.random.Generator, n: int, scale: float) -> list[ProbeRecord]:
    ttfts = rng.lognormal(np.log(0.2), 0.3, size=n) * scale
    return [
        record(100.0 * i / n, float(t), tuple(float(g) for g in rng.gamma(4.0, 0.005 * scale, 15)))
        for i, t in enumerate(ttfts)
    ]


def _beyond_share(scale: float, kind: str, percentile: float, pairs: int = 30) -> float:
    beyond = 0
    for seed in range(pairs):
        rng = np.random.default_rng(seed)
        before, after = _requests(rng, 200, 1.0), _requests(rng, 200, scale)
        values = [
            np.percentile(
                [r.ttft_s for r in side] if kind == "ttft" else [g for r in side for g in r.itl_s],
                percentile,
            )
            for side in (before, after)
        ]
        noise = _side_noise(kind, before, after, percentile)
        assert noise is not None
        beyond += bool(abs(values[1] - values[0]) > noise)
    return beyond / pairs


@pytest.mark.parametrize(("kind", "percentile"), [("ttft", 50.0), ("ttft", 90.0), ("itl", 99.0)])
def test_two_draws_of_one_distribution_stay_within_the_noise(kind: str, percentile: float) -> None:
    # At about 95%, some 1 pair in 20 is beyond by chance; well under a fifth must be.
    assert _beyond_share(1.0, kind, percentile) <= 0.15


@pytest.mark.parametrize(("kind", "percentile"), [("ttft", 50.0), ("ttft", 90.0), ("itl", 99.0)])
def test_a_clear_shift_is_beyond_the_noise(kind: str, percentile: float) -> None:
    assert _beyond_share(1.3, kind, percentile) >= 0.9
