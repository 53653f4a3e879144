"""The slow / skewed rule on hand-made peers: each case worked against the model's median."""

from __future__ import annotations

import pytest

from slotop.actions.fleet.outliers import OutlierThresholds, Peer, outlier_flags
from slotop.collectors.histograms import QuantileEstimate

T = OutlierThresholds(slow_ratio=2.0, skew_kv_ratio=0.25, skew_running_ratio=2.0)


def ttft(value: float, lower: float, upper: float) -> QuantileEstimate:
    return QuantileEstimate(0.99, value, lower, upper, 100.0)


def peer(name: str, value: float, lower: float, upper: float, kv: float = 0.5, run: float = 4):
    return Peer(name, ttft(value, lower, upper), kv, run)


@pytest.mark.parametrize(
    ("peers", "expected"),
    [
        pytest.param(
            # median 0.1; c at 0.4 = 4× in (0.25, 0.5], lower bound above the median: slow.
            [peer("a", 0.1, 0.05, 0.1), peer("b", 0.1, 0.05, 0.1), peer("c", 0.4, 0.25, 0.5)],
            {"c": ["slow"]},
            id="slow",
        ),
        pytest.param(
            # c at 0.3 = 3× the median, but its bucket (0.05, 0.5] reaches below 0.1: not slow.
            [peer("a", 0.1, 0.05, 0.1), peer("b", 0.1, 0.05, 0.1), peer("c", 0.3, 0.05, 0.5)],
            {},
            id="coarse bucket alone",
        ),
        pytest.param(
            # 0.19 is under 2× 0.1.
            [peer("a", 0.1, 0.05, 0.1), peer("b", 0.1, 0.05, 0.1), peer("c", 0.19, 0.1, 0.25)],
            {},
            id="under the ratio",
        ),
        pytest.param(
            [peer("a", 0.1, 0.05, 0.1), peer("c", 0.4, 0.25, 0.5)], {}, id="two peers say nothing"
        ),
        pytest.param(
            # KV median 0.4; c at 0.9 is 0.5 away.
            [
                peer("a", 0.1, 0.05, 0.1, kv=0.4),
                peer("b", 0.1, 0.05, 0.1, kv=0.4),
                peer("c", 0.1, 0.05, 0.1, kv=0.9),
            ],
            {"c": ["skewed:kv_usage_ratio"]},
            id="kv skew",
        ),
        pytest.param(
            # running median 4; c at 12 (3×, 8 apart) and d at 1 (4× fewer, 3 apart).
            [
                peer("a", 0.1, 0.05, 0.1, run=4),
                peer("b", 0.1, 0.05, 0.1, run=4),
                peer("c", 0.1, 0.05, 0.1, run=12),
                peer("d", 0.1, 0.05, 0.1, run=1),
                peer("e", 0.1, 0.05, 0.1, run=5),
            ],
            {"c": ["skewed:running"], "d": ["skewed:running"]},
            id="running skew both ways",
        ),
        pytest.param(
            # median 1; c at 3 is 3× and 2 apart: flagged (at least 2); d at 2 is 2× but 1 apart.
            [
                peer("a", 0.1, 0.05, 0.1, run=1),
                peer("b", 0.1, 0.05, 0.1, run=1),
                peer("f", 0.1, 0.05, 0.1, run=1),
                peer("c", 0.1, 0.05, 0.1, run=3),
                peer("d", 0.1, 0.05, 0.1, run=2),
            ],
            {"c": ["skewed:running"]},
            id="few requests apart",
        ),
    ],
)
def test_outliers(peers: list[Peer], expected: dict[str, list[str]]) -> None:
    found = outlier_flags(peers, T, 99.0)
    named = {
        name: [f.kind if f.kind == "slow" else f"{f.kind}:{f.on}" for f in flags]
        for name, flags in found.items()
    }
    assert named == expected


def test_the_words_name_value_median_and_ratio() -> None:
    peers = [peer("a", 0.1, 0.05, 0.1), peer("b", 0.1, 0.05, 0.1), peer("c", 0.4, 0.25, 0.5)]
    (flag,) = outlier_flags(peers, T, 99.0)["c"]
    assert flag.text == "slow: TTFT p99 400 ms, 4.0× the model's median 100 ms"
