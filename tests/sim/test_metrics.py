"""The sim's /metrics has real vLLM 0.32's families (names, types, labels, buckets) and sane values."""

from __future__ import annotations

from dataclasses import replace

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from slotop.sim.capacity import kv_capacity
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.metrics import (
    LAG_BUCKETS,
    LagRecorder,
    RequestFacts,
    SimMetrics,
    cache_config_labels,
    request_tokens_buckets,
)
from slotop.sim.tables import gpu_by_name, model_by_name_or_path
from slotop.sim.types import (
    EngineConfig,
    EngineStats,
    FinishedRequest,
    FinishReason,
    RequestTiming,
    StepOutcome,
)
from tests.support.paths import CAPTURES

LOAD_CAPTURE = CAPTURES / "vllm-0.32-cpu-load.txt"
CAPTURED_MAX_MODEL_LEN = 1024


def _config(max_model_len: int = CAPTURED_MAX_MODEL_LEN) -> EngineConfig:
    return resolve_engine_config(
        model_by_name_or_path("llama-3.1-8b"), gpu_by_name("h100-sxm"), max_model_len=max_model_len
    )


def _metrics(max_model_len: int = CAPTURED_MAX_MODEL_LEN) -> SimMetrics:
    config = _config(max_model_len)
    labels = cache_config_labels(config, kv_capacity(config))
    return SimMetrics("tiny-llama", max_model_len, labels, late_threshold_s=0.002)


def _stats(running: int = 0, waiting: int = 0, used: int = 0) -> EngineStats:
    return EngineStats(
        num_running=running,
        num_waiting=waiting,
        kv_blocks_used=used,
        kv_blocks_total=100,
        kv_usage_ratio=used / 100,
        preemptions_total=0,
        prompt_tokens_total=0,
        generation_tokens_total=0,
        prefix_cache_queries_total=0,
        prefix_cache_hits_total=0,
    )


def _finished(
    request_id: str, reason: FinishReason, output_tokens: int, preemptions: int = 0
) -> FinishedRequest:
    return FinishedRequest(
        request_id=request_id,
        finish_reason=reason,
        prompt_tokens=100,
        output_tokens=output_tokens,
        max_tokens=64,
        num_preemptions=preemptions,
        timing=RequestTiming(
            arrival_s=1.0, queued_s=1.2, first_scheduled_s=1.5, first_token_s=2.0, finished_s=4.0
        ),
    )


def _outcome(
    end_s: float,
    emitted: tuple[str, ...] = (),
    first: tuple[str, ...] = (),
    finished: tuple[FinishedRequest, ...] = (),
    preempted: tuple[str, ...] = (),
    stats: EngineStats | None = None,
) -> StepOutcome:
    return StepOutcome(
        start_s=end_s - 0.01,
        end_s=end_s,
        gpu_s=0.01,
        emitted_ids=emitted,
        first_token_ids=first,
        finished=finished,
        preempted_ids=preempted,
        prefill_tokens=0,
        decode_tokens=len(emitted),
        stats=stats or _stats(),
        scheduled_stats=stats or _stats(),
    )


def _families(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _exercised_sim_families() -> dict[str, Metric]:
    """The sim's exposition after a step or two, so every family holds samples."""
    metrics = _metrics()
    facts = {"a": RequestFacts(0.0, 100)}
    metrics.record_step(_outcome(0.05, ("a",), ("a",)), facts, {})
    metrics.record_step(
        _outcome(0.06, ("a",), finished=(_finished("a", "length", 2),)), facts, {"a": 0.05}
    )
    metrics.http.observe("/v1/completions", "POST", 200, 100, 0, 0.2)
    return _families(generate_latest(metrics.registry).decode())


def _label_names(family: Metric) -> set[str]:
    return {name for sample in family.samples for name in sample.labels} - {"le", "quantile"}


def _bucket_bounds(family: Metric) -> list[str]:
    bounds = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
    return sorted(set(bounds), key=float)


REAL = _families(LOAD_CAPTURE.read_text(encoding="utf-8"))
SIM = _exercised_sim_families()
MONITORED = sorted(
    name
    for name in REAL
    if name.startswith("vllm:") or (name.startswith("http_") and not name.endswith("_created"))
)


def test_the_capture_holds_the_families_a_monitor_reads() -> None:
    for name in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:kv_cache_usage_perc",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions",
        "vllm:cache_config_info",
        "http_requests",
    ):
        assert name in MONITORED


@pytest.mark.parametrize("name", MONITORED)
def test_every_real_family_exists_in_the_sim_with_the_same_type_and_labels(name: str) -> None:
    assert name in SIM, f"{name} missing from the sim's /metrics"
    assert SIM[name].type == REAL[name].type
    assert _label_names(SIM[name]) == _label_names(REAL[name])


@pytest.mark.parametrize("name", [n for n in MONITORED if REAL[n].type == "histogram"])
def test_histogram_buckets_match_the_real_replica(name: str) -> None:
    assert _bucket_bounds(SIM[name]) == _bucket_bounds(REAL[name])


def test_the_sim_invents_no_vllm_family_and_keeps_its_own_outside_the_namespace() -> None:
    sim_only = {name for name in SIM if name.startswith("vllm:")} - set(REAL)
    assert sim_only == set()
    own = {name for name in SIM if name.startswith("slotop_sim_")}
    assert own >= {"slotop_sim_token_lag_seconds", "slotop_sim_late_tokens"}


def test_process_and_python_families_are_there_too() -> None:
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "python_info"):
        assert name in REAL
        assert SIM[name].type == REAL[name].type


def test_cache_config_info_carries_the_engine_sizing() -> None:
    config = _config()
    capacity = kv_capacity(config)
    (sample,) = SIM["vllm:cache_config_info"].samples
    assert sample.value == 1.0
    assert sample.labels["engine"] == "0"
    assert sample.labels["num_gpu_blocks"] == str(capacity.num_gpu_blocks)
    assert sample.labels["kv_cache_size_tokens"] == str(capacity.kv_cache_size_tokens)
    assert sample.labels["block_size"] == str(config.block_size)
    assert sample.labels["cache_dtype"] == config.kv_cache_dtype
    assert float(sample.labels["kv_cache_max_concurrency"]) == pytest.approx(
        capacity.max_concurrency
    )


@pytest.mark.parametrize(
    ("max_model_len", "top"),
    [(1, 1), (9, 5), (10, 10), (1024, 1000), (2048, 2000), (131072, 100000)],
)
def test_request_token_buckets_are_a_1_2_5_series_capped_at_max_model_len(
    max_model_len: int, top: int
) -> None:
    buckets = request_tokens_buckets(max_model_len)
    assert buckets[0] == 1
    assert buckets[-1] == top
    assert all(b in (1, 2, 5) or b / 10 in buckets for b in buckets)


def _value(metrics: SimMetrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(
        name, {"model_name": "tiny-llama", "engine": "0", **labels}
    )
    assert value is not None, name
    return value


def test_a_step_sets_gauges_and_counts_tokens_ttft_and_itl() -> None:
    metrics = _metrics()
    facts = {"a": RequestFacts(0.0, 100), "b": RequestFacts(0.02, 50)}
    metrics.record_step(
        _outcome(0.05, ("a", "b"), ("a", "b"), stats=_stats(running=2, waiting=3, used=40)),
        facts,
        {},
    )
    metrics.record_step(
        _outcome(0.065, ("a", "b"), preempted=("b",)), facts, {"a": 0.05, "b": 0.05}
    )
    assert _value(metrics, "vllm:num_requests_running") == 0
    assert _value(metrics, "vllm:prompt_tokens_total") == 150
    assert _value(metrics, "vllm:prompt_tokens_by_source_total", source="local_compute") == 150
    assert _value(metrics, "vllm:generation_tokens_total") == 4
    assert _value(metrics, "vllm:num_preemptions_total") == 1
    assert _value(metrics, "vllm:time_to_first_token_seconds_count") == 2
    assert _value(metrics, "vllm:time_to_first_token_seconds_sum") == pytest.approx(0.05 + 0.03)
    assert _value(metrics, "vllm:inter_token_latency_seconds_count") == 2
    assert _value(metrics, "vllm:inter_token_latency_seconds_sum") == pytest.approx(0.03)
    assert _value(metrics, "vllm:iteration_tokens_total_sum") == 150 + 2 + 2


def test_cached_prompt_tokens_are_split_from_computed_ones_as_vllm_counts_them() -> None:
    # a (100 tokens, 64 of them cached) and b (50, none cached) both admitted and prefilled.
    metrics = _metrics()
    facts = {"a": RequestFacts(0.0, 100), "b": RequestFacts(0.0, 50)}
    stats = replace(
        _stats(running=2),
        prefix_cache_queries_total=150,
        prefix_cache_hits_total=64,
        prompt_tokens_cached_total=64,
    )
    metrics.record_step(_outcome(0.05, ("a", "b"), ("a", "b"), stats=stats), facts, {})
    finished = replace(_finished("a", "length", 1), cached_prompt_tokens=64)
    metrics.record_step(_outcome(0.06, finished=(finished,), stats=stats), facts, {})
    assert _value(metrics, "vllm:prefix_cache_queries_total") == 150
    assert _value(metrics, "vllm:prefix_cache_hits_total") == 64
    assert _value(metrics, "vllm:prompt_tokens_total") == 150
    assert _value(metrics, "vllm:prompt_tokens_by_source_total", source="local_compute") == 86
    assert _value(metrics, "vllm:prompt_tokens_by_source_total", source="local_cache_hit") == 64
    assert _value(metrics, "vllm:prompt_tokens_cached_total") == 64
    assert _value(metrics, "vllm:prompt_tokens_cached_by_source_total", source="device") == 64
    assert _value(metrics, "vllm:iteration_tokens_total_sum") == 86 + 2
    assert _value(metrics, "vllm:request_prefill_kv_computed_tokens_sum") == 100 - 64


def test_waiting_gauges_follow_the_engine() -> None:
    metrics = _metrics()
    metrics.record_step(_outcome(0.01, stats=_stats(running=4, waiting=12, used=86)), {}, {})
    assert _value(metrics, "vllm:num_requests_running") == 4
    assert _value(metrics, "vllm:num_requests_waiting") == 12
    assert _value(metrics, "vllm:num_requests_waiting_by_reason", reason="capacity") == 12
    assert _value(metrics, "vllm:num_requests_waiting_by_reason", reason="deferred") == 0
    assert _value(metrics, "vllm:kv_cache_usage_perc") == pytest.approx(0.86)


def test_a_finished_request_fills_the_per_request_histograms() -> None:
    metrics = _metrics()
    metrics.record_finished(_finished("a", "stop", output_tokens=5, preemptions=2))
    assert _value(metrics, "vllm:request_success_total", finished_reason="stop") == 1
    assert _value(metrics, "vllm:request_success_total", finished_reason="length") == 0
    assert _value(metrics, "vllm:e2e_request_latency_seconds_sum") == pytest.approx(3.0)
    # Queued by the scheduler at 1.2 s, admitted at 1.5 s: vLLM's queue time starts at the
    # scheduler, not at the request's arrival (1.0 s).
    assert _value(metrics, "vllm:request_queue_time_seconds_sum") == pytest.approx(0.3)
    assert _value(metrics, "vllm:request_prefill_time_seconds_sum") == pytest.approx(0.5)
    assert _value(metrics, "vllm:request_decode_time_seconds_sum") == pytest.approx(2.0)
    assert _value(metrics, "vllm:request_inference_time_seconds_sum") == pytest.approx(2.5)
    assert _value(metrics, "vllm:request_time_per_output_token_seconds_sum") == pytest.approx(0.5)
    assert _value(metrics, "vllm:request_num_preemptions_sum") == 2
    assert _value(metrics, "vllm:request_generation_tokens_sum") == 5
    assert _value(metrics, "vllm:request_prompt_tokens_sum") == 100
    assert _value(metrics, "vllm:request_params_max_tokens_sum") == 64


def test_an_aborted_request_is_not_counted_as_served() -> None:
    metrics = _metrics()
    metrics.record_finished(_finished("a", "abort", output_tokens=1))
    assert _value(metrics, "vllm:request_success_total", finished_reason="abort") == 0
    assert _value(metrics, "vllm:e2e_request_latency_seconds_count") == 0


def test_lag_counts_early_and_late_tokens_by_their_distance_from_schedule() -> None:
    lag = LagRecorder(late_threshold_s=0.002)
    for seconds in (-0.003, 0.0001, -0.0015, 0.003, 0.3, 10.0):
        lag.observe(seconds)
    assert lag.tokens_total == 6
    assert lag.tokens_late == 4
    (histogram,) = [f for f in lag.collect() if f.name == "slotop_sim_token_lag_seconds"]
    buckets = {s.labels["le"]: s.value for s in histogram.samples if s.name.endswith("_bucket")}
    assert buckets[repr(LAG_BUCKETS[0])] == 1
    assert buckets["0.002"] == 2
    assert buckets["0.5"] == 5
    assert buckets["+Inf"] == 6


def test_http_metrics_skip_the_excluded_routes_and_group_unknown_ones() -> None:
    metrics = _metrics()
    metrics.http.observe("/metrics", "GET", 200, 0, 100, 0.01)
    metrics.http.observe(None, "GET", 404, 0, 22, 0.001)
    metrics.http.observe("/v1/completions", "POST", 400, 50, 120, 0.001)
    sample = metrics.registry.get_sample_value
    assert (
        sample("http_requests_total", {"handler": "/metrics", "method": "GET", "status": "2xx"})
        is None
    )
    assert sample("http_requests_total", {"handler": "none", "method": "GET", "status": "4xx"}) == 1
    assert (
        sample(
            "http_requests_total", {"handler": "/v1/completions", "method": "POST", "status": "4xx"}
        )
        == 1
    )
    assert sample("http_request_size_bytes_sum", {"handler": "/v1/completions"}) == 50
