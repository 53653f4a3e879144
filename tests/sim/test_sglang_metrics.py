"""In SGLang mode /metrics has the real server's families (names, types, labels, buckets, help)
and its values mean what SGLang's mean: the engine is driven in simulated time here, no server."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from prometheus_client import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from slotop.sim.engine import Engine
from slotop.sim.metrics import RequestFacts
from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.flags import build_parser, replica_from_args
from slotop.sim.sglang.metrics import SglangMetrics
from tests.support.paths import CAPTURES

CAPTURE_NAMES = ("sglang-0.5.23-cpu-load.txt", "sglang-0.5.23-cpu-idle.txt")


def _families(text: str) -> dict[str, Metric]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def _replica(*flags: str) -> SglangReplica:
    return replica_from_args(build_parser().parse_args(["--served-model-name=tiny-llama", *flags]))


@dataclass(frozen=True, slots=True)
class Ask:
    """One request of a driven run: its prompt's length, its output, whether it streams."""

    prompt_tokens: int
    max_tokens: int
    stream: bool
    arrival_s: float = 0.0
    prompt_ids: tuple[int, ...] | None = None


@dataclass
class Run:
    """What a driven run saw: each request's token times, and /metrics after every step."""

    metrics: SglangMetrics
    token_s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    pages: list[dict[str, Metric]] = field(default_factory=list)
    preempted: list[tuple[str, ...]] = field(default_factory=list)


def drive(replica: SglangReplica, asks: Sequence[Ask], scrape: bool = False) -> Run:
    """Run every request through the engine to its end, telling the metrics as the server does."""
    engine = Engine(replica.engine)
    metrics = SglangMetrics(replica, 0.002, activity=engine.gpu_activity)
    run = Run(metrics)
    facts: dict[str, RequestFacts] = {}
    pending = sorted(enumerate(asks), key=lambda item: item[1].arrival_s)
    now = 0.0
    while pending or engine.has_work():
        while pending and pending[0][1].arrival_s <= now:
            index, ask = pending.pop(0)
            rid = f"r{index}"
            prompt = ask.prompt_ids if ask.prompt_ids is not None else ask.prompt_tokens
            engine.submit(rid, prompt, ask.max_tokens, True, ask.arrival_s)
            facts[rid] = RequestFacts(ask.arrival_s, ask.prompt_tokens, ask.stream, ask.max_tokens)
        if not engine.has_work():
            now = pending[0][1].arrival_s
            continue
        outcome = engine.step(now)
        metrics.record_step(outcome, facts, {})
        metrics.record_stats(engine.stats())
        for rid in outcome.emitted_ids:
            run.token_s[rid].append(outcome.end_s)
        if outcome.preempted_ids:
            run.preempted.append(outcome.preempted_ids)
        if scrape:
            run.pages.append({family.name: family for family in metrics.collect()})
        now = outcome.end_s
    return run


def _page(run: Run) -> dict[str, Metric]:
    return _families(generate_latest(run.metrics.registry).decode())


def _value(page: dict[str, Metric], name: str, **labels: str) -> float:
    family = page[name]
    matches = [
        s.value
        for s in family.samples
        if all(s.labels.get(k) == v for k, v in labels.items())
        and not s.name.endswith(("_bucket", "_sum"))
    ]
    assert len(matches) == 1, (name, labels, family.samples)
    return matches[0]


def _histogram(page: dict[str, Metric], name: str, **labels: str) -> tuple[float, float]:
    """(count, sum) of one histogram series."""
    samples = [
        s for s in page[name].samples if all(s.labels.get(k) == v for k, v in labels.items())
    ]
    count = next(s.value for s in samples if s.name == name + "_count")
    total = next(s.value for s in samples if s.name == name + "_sum")
    return count, total


# --- the shape of the page ---------------------------------------------------------------


def _exercised_page() -> dict[str, Metric]:
    """The sim's page after streaming and non-streaming requests (the warm-up's included)."""
    replica = _replica("--max-total-tokens=4096", "--context-length=2048", "--enable-metrics")
    asks = [Ask(19, 8, stream=False), Ask(256, 60, stream=True), Ask(256, 60, stream=False)]
    run = drive(replica, asks)
    for endpoint, method, status in (("/health", "GET", 200), ("/metrics", "GET", 200)):
        run.metrics.http.served(endpoint, method, status)
    return _page(run)


REAL: dict[str, list[Metric]] = defaultdict(list)
for _name in CAPTURE_NAMES:
    for _family in _families((CAPTURES / _name).read_text(encoding="utf-8")).values():
        REAL[_family.name].append(_family)
SIM = _exercised_page()


def _label_names(families: Sequence[Metric]) -> set[str]:
    names = {name for family in families for s in family.samples for name in s.labels}
    # `le` is a histogram's bucket label, but an ordinary label of SGLang's gauge histograms.
    return names if families[0].type == "gauge" else names - {"le"}


def _bounds(families: Sequence[Metric]) -> list[float]:
    bounds = {
        s.labels["le"] for family in families for s in family.samples if s.name.endswith("_bucket")
    }
    return sorted(float(bound) for bound in bounds)


def test_the_family_set_is_the_real_servers() -> None:
    ours = {name for name in SIM if name.startswith("sglang:")}
    assert ours == set(REAL)
    assert len(ours) == 82


def test_nothing_else_but_the_sims_own_families_outside_the_namespace() -> None:
    others = {name for name in SIM if not name.startswith("sglang:")}
    assert others and all(name.startswith("slotop_sim_") for name in others)
    assert not any(s.name.endswith("_created") for family in SIM.values() for s in family.samples)


@pytest.mark.parametrize("name", sorted(REAL))
def test_each_family_has_the_real_type_help_and_label_names(name: str) -> None:
    real = REAL[name]
    assert SIM[name].type == real[0].type
    assert SIM[name].documentation == real[0].documentation
    assert _label_names([SIM[name]]) == _label_names(real)


@pytest.mark.parametrize("name", sorted(n for n in REAL if REAL[n][0].type == "histogram"))
def test_each_histogram_has_the_real_buckets(name: str) -> None:
    assert _bounds([SIM[name]]) == _bounds(REAL[name])


def test_fixed_label_values_are_the_real_ones() -> None:
    for name in ("sglang:num_running_reqs", "sglang:queue_time_seconds"):
        labels = SIM[name].samples[0].labels
        assert {k: labels[k] for k in ("engine_type", "tp_rank", "pp_rank", "moe_ep_rank")} == {
            "engine_type": "unified",
            "tp_rank": "0",
            "pp_rank": "0",
            "moe_ep_rank": "0",
        }
    assert {s.labels["is_streaming"] for s in SIM["sglang:num_requests"].samples} == {
        "true",
        "false",
    }
    assert "pid" in SIM["sglang:num_retracted_reqs"].samples[0].labels
    modes = {s.labels["mode"] for s in SIM["sglang:prefill_effective_tokens"].samples}
    assert modes == {"input", "device_hit", "host_hit", "storage_hit"}


# --- what the values mean ----------------------------------------------------------------


def test_under_load_the_gauges_mean_what_they_say() -> None:
    """Running never passes --max-running-requests, the queue holds the rest, the pool adds up."""
    replica = _replica("--max-running-requests=4", "--max-total-tokens=20000")
    run = drive(replica, [Ask(256, 64, stream=True) for _ in range(16)], scrape=True)
    total = 20000
    queued = []
    for page in run.pages:
        running = _value(page, "sglang:num_running_reqs")
        queued.append(_value(page, "sglang:num_queue_reqs"))
        used = _value(page, "sglang:num_used_tokens")
        available = _value(page, "sglang:kv_available_tokens")
        evictable = _value(page, "sglang:kv_evictable_tokens")
        assert running <= 4
        assert _value(page, "sglang:max_total_num_tokens") == total
        assert used == _value(page, "sglang:kv_used_tokens") <= total
        assert used + available + evictable == total
        assert _value(page, "sglang:full_token_usage") == pytest.approx(used / total)
        assert _value(page, "sglang:token_usage") == round(used / total, 2)
    assert max(queued) == 12
    last = run.pages[-1]
    assert _value(last, "sglang:num_running_reqs") == 0
    assert _value(last, "sglang:num_queue_reqs") == 0
    assert _value(last, "sglang:gen_throughput") == 0
    # Finished requests leave their prompts radix-cached: evictable, not used.
    assert _value(last, "sglang:num_used_tokens") == 0


def test_gauges_hold_between_reports_and_move_on_prefill_and_every_40th_decode() -> None:
    replica = _replica("--max-total-tokens=20000")
    run = drive(replica, [Ask(100, 200, stream=True)], scrape=True)
    used = [_value(page, "sglang:num_used_tokens") for page in run.pages]
    # One prefill step, then 199 decode steps: reports after the prefill and every 40th decode,
    # then the idle report when the request has gone.
    # A step's report counts the slots allocated so far: a token's slot is taken by the step
    # that computes it, so the prefill holds the 100 prompt slots and the 40th decode 140.
    assert used[0] == 100
    assert used[1] == used[39] == 100
    assert used[40] == used[41] == 140
    assert used[80] == 180
    assert used[-1] == 0


def test_inter_token_latency_counts_tokens_as_sglang_observes_them() -> None:
    """A streamed request observes every token after its first; a non-streamed one's output
    reaches the tokenizer every 50 tokens, so it observes its tokens past the 50th only."""
    replica = _replica("--max-total-tokens=20000")
    asks = [
        Ask(64, 30, stream=True),
        Ask(64, 5, stream=True),
        Ask(64, 1, stream=True),
        Ask(64, 8, stream=False),
        Ask(64, 60, stream=False),
        Ask(64, 120, stream=False),
    ]
    run = drive(replica, asks)
    page = _page(run)
    times = [run.token_s[f"r{index}"] for index in range(len(asks))]
    expected_count = (30 - 1) + (5 - 1) + 0 + 0 + (60 - 50) + (120 - 50)
    expected_sum = sum(t[-1] - t[0] for t in times[:3]) + sum(t[-1] - t[49] for t in times[4:])
    count, total = _histogram(page, "sglang:inter_token_latency_seconds")
    assert count == expected_count
    assert total == pytest.approx(expected_sum)
    streamed = sum(len(t) for t in times[:3])
    assert _value(page, "sglang:generation_tokens", is_streaming="true") == streamed
    assert count == streamed - 3 + (60 - 50) + (120 - 50)


def test_per_request_histograms_by_streaming() -> None:
    replica = _replica("--max-total-tokens=20000")
    asks = [Ask(64, 10, stream=True, arrival_s=0.0), Ask(32, 6, stream=False, arrival_s=0.01)]
    run = drive(replica, asks)
    page = _page(run)
    for index, (ask, label) in enumerate(zip(asks, ("true", "false"), strict=True)):
        times = run.token_s[f"r{index}"]
        assert _histogram(page, "sglang:time_to_first_token_seconds", is_streaming=label) == (
            1,
            pytest.approx(times[0] - ask.arrival_s),
        )
        assert _histogram(page, "sglang:e2e_request_latency_seconds", is_streaming=label) == (
            1,
            pytest.approx(times[-1] - ask.arrival_s),
        )
        tpot = (times[-1] - times[0]) / (len(times) - 1)
        assert _histogram(
            page, "sglang:request_time_per_output_token_seconds", is_streaming=label
        ) == (1, pytest.approx(tpot))
        assert _value(page, "sglang:prompt_tokens", is_streaming=label) == ask.prompt_tokens
        assert _value(page, "sglang:generation_tokens", is_streaming=label) == ask.max_tokens
        assert _value(page, "sglang:num_requests", is_streaming=label) == 1
    assert _histogram(page, "sglang:prompt_tokens_histogram") == (2, 96)
    assert _histogram(page, "sglang:generation_tokens_histogram") == (2, 16)
    assert _value(page, "sglang:realtime_tokens", mode="prefill_compute") == 96
    assert _value(page, "sglang:realtime_tokens", mode="decode") == (10 - 1) + (6 - 1)


def test_prefix_hits_show_as_sglang_counts_them() -> None:
    """A prompt that repeats an earlier one is served from the radix cache: device hits, and
    `cached_tokens_total{cache_source="device"}`, which SGLang shows only once there is a hit."""
    replica = _replica("--max-total-tokens=20000")
    prompt = tuple(range(1000, 1064))
    first = drive(replica, [Ask(64, 4, stream=True, prompt_ids=prompt)])
    assert "sglang:cached_tokens" not in _page(first)
    run = drive(
        replica,
        [Ask(64, 4, stream=True, prompt_ids=prompt), Ask(64, 4, True, 1.0, prompt_ids=prompt)],
    )
    page = _page(run)
    # The second finds all but its last token cached (one is always computed).
    assert _value(page, "sglang:prefill_effective_tokens", mode="device_hit") == 63
    assert _value(page, "sglang:prefill_effective_tokens", mode="input") == 64 + 1
    assert _value(page, "sglang:cached_tokens", cache_source="device") == 63
    assert _value(page, "sglang:realtime_tokens", mode="prefill_cache") == 63
    assert _histogram(page, "sglang:uncached_prompt_tokens_histogram") == (2, 65)
    assert _value(page, "sglang:cache_hit_rate") == pytest.approx(63 / 64)


def test_preemptions_are_counted_as_sglangs_retractions() -> None:
    replica = _replica("--max-total-tokens=600", "--context-length=2048")
    run = drive(replica, [Ask(100, 120, stream=True) for _ in range(4)], scrape=True)
    retracted = [rid for ids in run.preempted for rid in ids]
    assert retracted, "the small pool should have forced retractions"
    page = run.pages[-1]
    assert _value(page, "sglang:num_retracted_requests") == len(retracted)
    assert _value(page, "sglang:num_retracted_input_tokens") == 100 * len(retracted)
    shown = {_value(p, "sglang:num_retracted_reqs") for p in run.pages}
    assert max(shown) >= 1
    assert _value(page, "sglang:num_retracted_reqs") == 0
    assert all(
        "sglang:num_retracted_requests" not in p for p in run.pages[: _first_with_preemption(run)]
    )


def _first_with_preemption(run: Run) -> int:
    for index, page in enumerate(run.pages):
        if "sglang:num_retracted_requests" in page:
            return index
    return len(run.pages)
