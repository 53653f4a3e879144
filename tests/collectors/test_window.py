"""Sliding windows: increases across resets, spans, bounded memory, empty windows."""

from __future__ import annotations

import math

import pytest

from slotop.collectors.reading import Reading, read_metrics_text
from slotop.collectors.window import Window, cumulative_view
from tests.support.paths import CAPTURES

INF = math.inf


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


def _absent() -> Reading:
    """Build a scrape that lacks every counter and histogram (a page cut short, say)."""
    return _reading({})


def test_a_counter_absent_from_one_scrape_carries_its_last_value() -> None:
    # Scrapes 0, 100, (absent), 105 one second apart: 100 then 0 then 5 per step, 105 in all.
    window = Window(60)
    steps = []
    for second, reading in enumerate(
        [_reading({"0": 0}), _reading({"0": 100}), _absent(), _reading({"0": 105})]
    ):
        window.push(float(second), reading)
        step = window.view(1)
        if step is not None:
            steps.append(step.increase("prompt_tokens"))
    assert steps == [100.0, 0.0, 5.0]
    view, two_steps = window.view(60), window.view(2)
    assert view is not None and two_steps is not None
    assert view.increase("prompt_tokens") == 105.0 and view.covered_s == 3.0
    assert two_steps.increase("prompt_tokens") == 5.0
    assert two_steps.rate_per_s("prompt_tokens") == 2.5


def test_an_engine_absent_from_one_scrape_carries_its_last_value() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 10, "1": 50}))
    window.push(1.0, _reading({"0": 20}))  # engine 1's line is missing from this page
    window.push(2.0, _reading({"0": 30, "1": 58}))
    view = window.view(60)
    assert view is not None and view.increase("prompt_tokens") == 20.0 + 8.0


def test_a_histogram_absent_from_one_scrape_carries_its_last_buckets() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 0}, {"0": (1, 2, 2)}))
    window.push(1.0, _reading({"0": 0}, {"0": (3, 4, 5)}))
    window.push(2.0, _reading({"0": 0}))
    window.push(3.0, _reading({"0": 0}, {"0": (4, 6, 8)}))
    view, last_step = window.view(60), window.view(1)
    assert view is not None and last_step is not None
    whole, step = view.histogram("ttft"), last_step.histogram("ttft")
    assert whole is not None and step is not None
    # (4, 6, 8) − (1, 2, 2) over the span; (4, 6, 8) − (3, 4, 5) in the last step.
    assert whole.buckets == ((0.1, 3.0), (1.0, 4.0), (INF, 6.0)) and whole.count == 6.0
    assert step.buckets == ((0.1, 1.0), (1.0, 2.0), (INF, 3.0)) and step.count == 3.0


@pytest.mark.parametrize("bad", ["NaN", "+Inf", "-Inf", "-3"])
def test_a_sample_no_counter_can_hold_is_skipped(bad: str) -> None:
    window = Window(60)
    for second, value in enumerate(["10", bad, "20", "30"]):
        window.push(float(second), _reading({"0": float(value)}))
    view, last_step = window.view(60), window.view(1)
    assert view is not None and last_step is not None
    assert view.increase("prompt_tokens") == 20.0
    assert last_step.increase("prompt_tokens") == 10.0


def test_a_nan_bucket_is_skipped_and_the_others_still_count() -> None:
    window = Window(60)
    window.push(0.0, _reading({}, {"0": (1, 2, 2)}))
    window.push(1.0, _reading({}, {"0": (math.nan, 3, 3)}))
    window.push(2.0, _reading({}, {"0": (2, 4, 4)}))
    view = window.view(60)
    assert view is not None
    delta = view.histogram("ttft")
    assert delta is not None
    assert delta.buckets == ((0.1, 1.0), (1.0, 2.0), (INF, 2.0)) and delta.count == 2.0
    assert delta.sum == pytest.approx(0.4)


def test_a_view_lacks_a_counter_its_span_holds_no_sample_of() -> None:
    window = Window(60)
    window.push(0.0, _reading({"0": 1}))
    window.push(1.0, _reading({"0": 4}))
    for second in range(2, 10):
        window.push(float(second), _absent())
    short, long = window.view(5), window.view(60)
    assert short is not None and long is not None
    assert short.increase("prompt_tokens") is None and short.rate_per_s("prompt_tokens") is None
    assert long.increase("prompt_tokens") == 3.0


def test_a_series_gone_longer_than_the_window_is_forgotten_and_counts_afresh() -> None:
    window = Window(10)
    window.push(0.0, _reading({"0": 100}))
    for second in range(1, 21):
        window.push(float(second), _reading({}))
    window.push(21.0, _reading({"0": 150}))  # 50 more, somewhere in a 21 s gap: in no window
    window.push(22.0, _reading({"0": 160}))
    view = window.view(10)
    assert view is not None and view.increase("prompt_tokens") == 10.0


def test_series_of_past_lives_do_not_pile_up() -> None:
    # A multiprocess replica restarted every 5 s: each life's pids are new label sets.
    window = Window(10)
    for second in range(500):
        life = second // 5
        window.push(float(second), _reading({f"{life}-{pid}": float(second % 5) for pid in "ab"}))
    remembered = sum(len(values) for values in window._last.values())
    assert remembered <= 2 * 4  # pids a and b of the lives seen within the last ~10 s
    view = window.view(10)
    assert view is not None and view.increase("prompt_tokens") == 2 * (4 + 4)
