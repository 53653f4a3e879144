"""Sliding windows: increases across resets, spans, bounded memory, empty windows."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.collectors.reading import Reading, read_metrics_text
from slotop.collectors.window import Window, cumulative_view

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "metrics"


def _reading(
    tokens: dict[str, float], ttft: dict[str, tuple[float, float, float]] | None = None
) -> Reading:
    """Build a scrape: prompt tokens per engine, and TTFT buckets (≤0.1, ≤1, +Inf) per engine."""
    lines = ["# TYPE vllm:prompt_tokens_total counter"]
    lines += [f'vllm:prompt_tokens_total{{engine="{e}"}} {v}' for e, v in tokens.items()]
    lines.append("# TYPE vllm:time_to_first_token_seconds histogram")
    for engine, (low, mid, total) in (ttft or {}).items():
        for bound, count in (("0.1", low), ("1.0", mid), ("+Inf", total)):
            lines.append(
                f'vllm:time_to_first_token_seconds_bucket{{engine="{engine}",le="{bound}"}} {count}'
            )
        lines.append(f'vllm:time_to_first_token_seconds_count{{engine="{engine}"}} {total}')
        lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="{engine}"}} {total * 0.2}')
    return read_metrics_text("\n".join(lines) + "\n")


def test_fewer_than_two_readings_give_no_view() -> None:
    window = Window(60)
    assert window.view(60) is None
    window.push(0.0, _reading({"0": 5}))
    assert window.view(60) is None


# (readings of one engine's counter, expected increase): resets handled as Prometheus does.
COUNTER_CASES = [
    pytest.param([10, 20, 35], 25.0, id="growth"),
    pytest.param([100, 120, 5, 15], 35.0, id="restart: 20 before, 5 at it, 10 after"),
    pytest.param([50, 0, 0], 0.0, id="restart to zero, idle"),
    pytest.param([7, 7, 7], 0.0, id="idle"),
]


@pytest.mark.parametrize(("values", "expected"), COUNTER_CASES)
def test_counter_increase_and_rate_over_the_window(values: list[float], expected: float) -> None:
    window = Window(60)
    for second, value in enumerate(values):
        window.push(float(second), _reading({"0": value}))
    view = window.view(60)
    assert view is not None
    assert view.increase("prompt_tokens") == expected
    assert view.covered_s == len(values) - 1
    assert view.rate_per_s("prompt_tokens") == pytest.approx(expected / (len(values) - 1))
    assert view.rate_per_s("prompt_tokens") >= 0  # type: ignore[operator]


def test_engines_are_reset_checked_one_by_one_then_summed() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 100, "1": 10}))
    window.push(1.0, _reading({"0": 3, "1": 30}))  # engine 0 restarted, engine 1 grew by 20
    view = window.view(60)
    assert view is not None and view.increase("prompt_tokens") == 23.0


def test_a_series_first_seen_mid_window_counts_from_its_first_reading() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 10}))
    window.push(1.0, _reading({"0": 12, "1": 500}))
    window.push(2.0, _reading({"0": 13, "1": 504}))
    view = window.view(60)
    assert view is not None and view.increase("prompt_tokens") == 3.0 + 4.0


def test_span_selects_the_readings_inside_it() -> None:
    window = Window(60)
    for second in range(0, 31):
        window.push(float(second), _reading({"0": second * 10.0}))
    short = window.view(10)
    long = window.view(60)
    assert short is not None and long is not None
    assert short.covered_s == 10.0 and short.increase("prompt_tokens") == 100.0
    assert long.covered_s == 30.0 and long.increase("prompt_tokens") == 300.0


def test_a_span_shorter_than_the_interval_uses_the_last_two_readings() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 0}))
    window.push(15.0, _reading({"0": 30}))
    view = window.view(10)
    assert view is not None and view.covered_s == 15.0 and view.rate_per_s("prompt_tokens") == 2.0


def test_memory_is_bounded_by_span_and_by_count() -> None:
    by_span = Window(10)
    by_count = Window(3600, max_readings=16)
    for second in range(1000):
        by_span.push(float(second), _reading({"0": float(second)}))
        by_count.push(float(second), _reading({"0": float(second)}))
    assert len(by_span) <= 12
    assert len(by_count) == 16


def test_time_must_move_forward() -> None:
    window = Window(60)
    window.push(5.0, _reading({"0": 1}))
    with pytest.raises(ValueError):
        window.push(5.0, _reading({"0": 2}))


def test_histogram_window_sums_engines_and_gives_quantiles() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 0}, {"0": (1, 2, 2), "1": (0, 0, 0)}))
    window.push(1.0, _reading({"0": 0}, {"0": (5, 8, 10), "1": (0, 6, 10)}))
    view = window.view(60)
    assert view is not None
    delta = view.histogram("ttft")
    assert delta is not None
    # engine 0 gained (4, 6, 8), engine 1 (0, 6, 10): summed (4, 12, 18) cumulative.
    assert delta.buckets == ((0.1, 4.0), (1.0, 12.0), (float("inf"), 18.0))
    assert delta.count == 18.0
    assert delta.quantile(0.5) is not None
    # rank 9 in (0.1, 1]: 0.1 + 0.9 × (9 − 4) / (12 − 4)
    assert delta.quantile(0.5).value == pytest.approx(0.1 + 0.9 * 5 / 8)  # type: ignore[union-attr]


def test_an_idle_window_has_no_quantile_but_a_zero_rate() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 5}, {"0": (1, 2, 2)}))
    window.push(1.0, _reading({"0": 5}, {"0": (1, 2, 2)}))
    view = window.view(60)
    assert view is not None
    delta = view.histogram("ttft")
    assert delta is not None and delta.count == 0 and delta.quantile(0.99) is None
    assert delta.mean is None
    assert view.rate_per_s("prompt_tokens") == 0.0


def test_reset_between_real_captures_is_handled_bucket_by_bucket_as_prometheus_does() -> None:
    before = read_metrics_text((CAPTURES / "vllm-0.32-cpu-restart-a.txt").read_text("utf-8"))
    after = read_metrics_text((CAPTURES / "vllm-0.32-cpu-restart-b.txt").read_text("utf-8"))
    window = Window(60)
    window.push(0.0, before)
    window.push(30.0, after)
    view = window.view(60)
    assert view is not None
    old, new = cumulative_view(before), cumulative_view(after)
    # Every counter fell across the restart, so each window increase is the new life's total.
    assert all(new.counters[key] < old.counters[key] for key in new.counters if old.counters[key])
    assert view.counters == {
        key: value if value < old.counters[key] else value - old.counters[key]
        for key, value in new.counters.items()
    }
    # Each bucket is its own counter: one that did not fall (e.g. both 0) shows no reset.
    for key in ("ttft", "itl", "e2e"):
        old_buckets = dict(old.histograms[key].buckets)
        expected = tuple(
            (bound, count if count < old_buckets[bound] else count - old_buckets[bound])
            for bound, count in new.histograms[key].buckets
        )
        assert view.histograms[key].buckets == expected
        assert view.histograms[key].count == new.histograms[key].count
    assert view.histograms["ttft"].quantile(0.5) is not None


def test_cumulative_view_has_totals_and_no_rates() -> None:
    view = cumulative_view(_reading({"0": 10, "1": 5}, {"0": (1, 2, 3)}))
    assert view.covered_s is None
    assert view.increase("prompt_tokens") == 15.0
    assert view.rate_per_s("prompt_tokens") is None
    assert view.histogram("ttft") is not None
