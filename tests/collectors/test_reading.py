"""vLLM's names across versions, and scrapes reduced to canonical keys (real and hand-made dumps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from slotop.collectors.names import BY_KEY, CATALOGUE, is_known
from slotop.collectors.reading import Reading, gauge_total, gauge_totals, read_metrics_text
from slotop.collectors.window import cumulative_view
from tests.support.paths import CAPTURES

HANDMADE = Path(__file__).resolve().parent / "data"


def _read(path: Path) -> Reading:
    return read_metrics_text(path.read_text(encoding="utf-8"))


def test_catalogue_keys_and_names_are_unique() -> None:
    keys = [spec.key for spec in CATALOGUE]
    names = [name for spec in CATALOGUE for name in spec.names]
    assert len(keys) == len(set(keys))
    assert len(names) == len(set(names))


def test_vllm_0_32_capture_has_every_current_name_and_nothing_unknown() -> None:
    reading = _read(CAPTURES / "vllm-0.32-cpu-load.txt")
    for spec in CATALOGUE:
        if spec.used and not spec.v0_only and not spec.stands_in_for and not spec.sim_only:
            assert reading.found_names.get(spec.key) == spec.names[0], spec.key
    assert reading.missing == ()
    assert reading.unknown == ()
    assert not reading.v0_engine


RENAMES = [
    pytest.param(
        "gauge", "vllm:gpu_cache_usage_perc", "kv_usage", id="gpu_cache_usage_perc→kv_cache_usage"
    ),
    pytest.param(
        "histogram", "vllm:time_per_output_token_seconds", "itl", id="time_per_output_token→itl"
    ),
    pytest.param(
        "counter", "vllm:gpu_prefix_cache_queries", "prefix_cache_queries", id="gpu_prefix_queries"
    ),
    pytest.param(
        "counter", "vllm:gpu_prefix_cache_hits", "prefix_cache_hits", id="gpu_prefix_hits"
    ),
]


def _family_text(kind: str, name: str, engine: str = "0") -> str:
    labels = f'engine="{engine}",model_name="m"'
    if kind == "gauge":
        return f"# TYPE {name} gauge\n{name}{{{labels}}} 0.5\n"
    if kind == "counter":
        return f"# TYPE {name}_total counter\n{name}_total{{{labels}}} 7\n"
    return (
        f"# TYPE {name} histogram\n"
        f'{name}_bucket{{{labels},le="0.1"}} 1\n{name}_bucket{{{labels},le="+Inf"}} 2\n'
        f"{name}_count{{{labels}}} 2\n{name}_sum{{{labels}}} 0.3\n"
    )


@pytest.mark.parametrize(("kind", "old_name", "key"), RENAMES)
def test_old_names_land_on_the_canonical_key(kind: str, old_name: str, key: str) -> None:
    reading = read_metrics_text(_family_text(kind, old_name))
    assert reading.found_names[key] == old_name
    store = {"gauge": reading.gauges, "counter": reading.counters, "histogram": reading.histograms}
    assert key in store[kind]


def test_newest_name_wins_when_a_replica_shows_both() -> None:
    text = _family_text("histogram", "vllm:time_per_output_token_seconds") + _family_text(
        "histogram", "vllm:inter_token_latency_seconds"
    )
    assert read_metrics_text(text).found_names["itl"] == "vllm:inter_token_latency_seconds"


def test_unknown_vllm_families_are_reported_and_known_groups_are_not() -> None:
    text = (
        _family_text("gauge", "vllm:num_requests_running")
        + _family_text("gauge", "vllm:brand_new_gauge")
        + _family_text("counter", "vllm:spec_decode_num_drafts")
        + _family_text("histogram", "vllm:brand_new_seconds")
    )
    reading = read_metrics_text(text)
    assert reading.unknown == ("vllm:brand_new_gauge", "vllm:brand_new_seconds")
    assert is_known("vllm:spec_decode_num_drafts")


def test_v0_era_dump_yields_what_it_can_and_says_what_it_lacks() -> None:
    reading = _read(HANDMADE / "vllm-0.6-v0-handmade.txt")
    assert reading.v0_engine
    assert reading.found_names["kv_usage"] == "vllm:gpu_cache_usage_perc"
    assert reading.found_names["itl"] == "vllm:time_per_output_token_seconds"
    assert gauge_total(reading, "requests_swapped") == 1.0
    assert reading.missing == (
        "vllm:request_queue_time_seconds",
        "vllm:request_prefill_time_seconds",
        "vllm:request_decode_time_seconds",
    )
    assert reading.unknown == ()
    assert reading.model_names == ("meta-llama/Meta-Llama-3-8B-Instruct",)
    (config,) = reading.cache_configs
    assert (config.engine, config.num_gpu_blocks, config.block_size_tokens) == ("", 27153, 16)
    assert config.kv_cache_size_tokens is None and config.max_concurrency is None


def test_multi_engine_dump_keeps_series_per_engine() -> None:
    reading = _read(HANDMADE / "vllm-multi-engine-handmade.txt")
    assert reading.engines == ("0", "1")
    assert len(reading.histograms["ttft"]) == 2
    assert sorted(sum(s.values()) for s in [reading.counters["prompt_tokens"]]) == [4000.0]
    assert gauge_totals(reading.gauges["kv_usage"], by="engine") == {"0": 0.5, "1": 0.25}
    assert gauge_total(reading, "requests_running") == 8.0
    assert [c.engine for c in reading.cache_configs] == ["0", "1"]


def test_multiprocess_dump_takes_the_max_across_pids_and_sorts_buckets() -> None:
    reading = _read(HANDMADE / "vllm-multiprocess-handmade.txt")
    assert gauge_total(reading, "requests_running") == 7.0
    (series,) = reading.histograms["ttft"].values()
    assert [bound for bound, _ in series.buckets] == [0.1, 0.25, 0.5, float("inf")]
    assert (series.count, series.sum) == (10.0, 2.5)


def test_dump_without_type_lines_still_reads_counters_and_histograms() -> None:
    text = "\n".join(
        line
        for line in (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8").splitlines()
        if line.startswith("vllm:")
    )
    typed = _read(CAPTURES / "vllm-0.32-cpu-load.txt")
    untyped = read_metrics_text(text)
    assert untyped.counters == typed.counters
    assert untyped.histograms == typed.histograms
    assert untyped.cache_configs == typed.cache_configs


GAUGE_CASES = [
    pytest.param({(("engine", "0"),): 2.0, (("engine", "1"),): 3.0}, None, {"": 5.0}, id="sum"),
    pytest.param(
        {(("engine", "0"), ("pid", "1")): 2.0, (("engine", "0"), ("pid", "2")): 4.0},
        "engine",
        {"0": 4.0},
        id="max over pids",
    ),
    pytest.param(
        {(("reason", "capacity"),): 1.0, (("other", "x"),): 2.0},
        "reason",
        {"capacity": 1.0, "": 2.0},
        id="absent label groups as empty",
    ),
    pytest.param({(("engine", "0"),): float("nan")}, None, {}, id="NaN skipped"),
]


@pytest.mark.parametrize(("series", "by", "expected"), GAUGE_CASES)
def test_gauge_totals(
    series: dict[tuple[tuple[str, str], ...], float], by: str | None, expected: dict[str, float]
) -> None:
    assert gauge_totals(series, by=by) == expected


def test_catalogue_lookup_by_key() -> None:
    assert BY_KEY["itl"].names == (
        "vllm:inter_token_latency_seconds",
        "vllm:time_per_output_token_seconds",
    )


def test_iteration_tokens_are_read_so_the_sweep_can_see_the_token_budget() -> None:
    capture = CAPTURES / "vllm-0.32-cpu-load.txt"
    reading = read_metrics_text(capture.read_text(encoding="utf-8"))
    delta = cumulative_view(reading).histogram("iteration_tokens")
    assert delta is not None
    estimate = delta.quantile(0.99)
    assert estimate is not None
    assert (estimate.bucket_lower, estimate.bucket_upper) == (256.0, 512.0)
    assert "vllm:iteration_tokens_total" not in reading.missing
