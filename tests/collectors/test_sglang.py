"""slotop against the real SGLang CPU server: who it is, `slotop snapshot` under load, its server
quantiles beside a real Prometheus's `histogram_quantile` of the same scrape, and the probe's
streams (completions and chat) counted as SGLang's own usage counts them."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx
import pytest

from slotop.cli import main
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape, PlannedRequest
from slotop.collectors.probe.records import Endpoint
from slotop.collectors.probe.stream import ProbeTarget, StreamMeter, request_body
from slotop.collectors.replica import Identity, ReplicaClient
from tests.conftest import SGLANG_RUNNING_CAP
from tests.support.prometheus_server import run_prometheus
from tests.support.sglang_replica import SglangReplica
from tests.support.vllm_replica import drive_load

pytestmark = [pytest.mark.sglang, pytest.mark.slow]

LATENCIES = {
    "ttft_s": "sglang:time_to_first_token_seconds",
    "itl_s": "sglang:inter_token_latency_seconds",
    "e2e_s": "sglang:e2e_request_latency_seconds",
    "queue_s": "sglang:queue_time_seconds",
}


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def test_the_server_is_told_as_sglang_with_its_version_and_kv_dtype(
    sglang_replica: SglangReplica,
) -> None:
    with ReplicaClient(sglang_replica.url) as client:
        assert client.identity() == Identity("sglang", "0.5.23", "auto", "float32", 4096)
        assert client.served_models() == ("tiny-llama",)


def _under_load(data: dict[str, Any]) -> bool:
    return bool(
        data["ttft_s"]["count"]
        and data["itl_s"]["count"]
        and data["throughput"]["generation_tokens_per_s"]
    )


def test_snapshot_json_of_a_loaded_sglang(
    sglang_replica: SglangReplica, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sglang_replica.url
    enough = threading.Event()  # set once a window caught the load: no more requests are sent
    load = threading.Thread(
        target=drive_load,
        kwargs={
            "url": url,
            "concurrency": 8,
            "requests": 48,
            "max_tokens": 64,
            "prompt_tokens": 64,
            "stop": enough,
        },
        daemon=True,
    )
    load.start()
    data: dict[str, Any] = {}
    while load.is_alive():  # until one window caught first tokens, decodes and finishes
        assert main(["snapshot", url, "--json", "--interval", "2"]) == 0
        data = json.loads(capsys.readouterr().out)
        if _under_load(data):
            break
    enough.set()
    load.join()
    assert _under_load(data), data
    replica = data["replica"]
    assert (replica["engine"], replica["version"], replica["vllm_version"]) == (
        "sglang",
        "0.5.23",
        None,
    )
    assert replica["served_models"] == ["tiny-llama"] and replica["healthy"] is True
    assert replica["engine_generation"] is None  # vLLM's v0/v1; SGLang has none
    kv = data["kv"]
    # --max-total-tokens 4096 in pages of one token; the dtype from /get_server_info.
    assert (kv["size_tokens"], kv["block_size_tokens"], kv["blocks_total"]) == (4096, 1, 4096)
    assert kv["cache_dtype"] == "auto"
    assert kv["blocks_used"] + kv["blocks_free"] == kv["blocks_total"]
    assert 0 <= kv["usage_ratio"] <= 1
    assert data["requests"]["running"] <= SGLANG_RUNNING_CAP
    for key in ("ttft_s", "itl_s"):
        assert data[key]["p50"] is not None and data[key]["p50"] <= data[key]["p99"]
    assert data["prefill_s"]["count"] is None  # SGLang has no such histogram: not a zero
    assert data["missing"] == [] and data["unknown"] == []
    assert main(["snapshot", url]) == 0
    text = capsys.readouterr().out
    assert "SGLang 0.5.23" in text and "prefill     SGLang has no such metric" in text


def _query(url: str, query: str) -> list[dict[str, Any]]:
    answer = httpx.get(f"{url}/api/v1/query", params={"query": query}, timeout=10).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


def _stored_name(url: str, metric: str) -> str:
    """The name Prometheus keeps the metric under. SGLang's prometheus_client answers a scraper
    that accepts OpenMetrics with its names escaped (`escaping=underscores`: `sglang:x` becomes
    `sglang_x`), and Prometheus 2 asks for OpenMetrics first."""
    for name in (metric, metric.replace(":", "_")):
        if _query(url, f'count({{__name__="{name}_bucket"}})'):
            return name
    raise AssertionError(f"Prometheus holds no {metric} under either name")


def _prometheus_quantile(url: str, q: float, metric: str) -> float:
    (sample,) = _query(url, f"histogram_quantile({q}, sum by (le) ({metric}_bucket))")
    return float(sample["value"][1])


def test_server_quantiles_equal_prometheus_histogram_quantile(
    sglang_replica: SglangReplica,
) -> None:
    drive_load(sglang_replica.url, concurrency=6, requests=18, max_tokens=48, prompt_tokens=96)
    host = sglang_replica.url.removeprefix("http://")
    with ReplicaClient(sglang_replica.url) as client:
        for prometheus in run_prometheus([host], interval_s=0.5):
            prometheus.wait_for_up(1)
            time.sleep(1.5)  # a few scrapes of the quiet server: every one holds the same counts
            body = client.metrics_text()
            snapshot = snapshot_of_dump(body, where="the capture")
            for key, metric in LATENCIES.items():
                stored = _stored_name(prometheus.url, metric)
                ours = getattr(snapshot.window, key)
                assert ours.count, f"{metric}: nothing observed"
                for percentile in (50.0, 90.0, 99.0):
                    estimate = ours.at(percentile)
                    assert estimate is not None
                    expected = _prometheus_quantile(prometheus.url, percentile / 100, stored)
                    assert estimate.value == pytest.approx(expected, rel=1e-9), (key, percentile)


def _shape(endpoint: Endpoint, output_tokens: int) -> LoadShape:
    """Fixed lengths; the probe's first requests are shortened (its opening, to spread the
    streams' phases), so a record's own plan is what it is checked against."""
    return LoadShape(
        endpoint=endpoint,
        prompt_lengths=LengthDistribution("fixed", 32),
        output_lengths=LengthDistribution("fixed", output_tokens),
        max_concurrency=8,
    )


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_the_probe_streams_and_steps_on_sglang(
    sglang_replica: SglangReplica, endpoint: Endpoint
) -> None:
    target = ProbeTarget(sglang_replica.url, model="tiny-llama")
    with Probe.start(target, _shape(endpoint, 24), concurrency=2) as probe:
        deadline = time.monotonic() + 120
        while (status := probe.status()) is None or status.done_total < 4:
            assert time.monotonic() < deadline, f"no four requests done; {probe.status()}"
            probe.wait_for_batch(0.2)
        probe.set_concurrency(6)
        while (status := probe.status()) is None or status.step < 1 or status.in_flight < 6:
            assert time.monotonic() < deadline, f"the step to 6 never showed; {probe.status()}"
            probe.wait_for_batch(0.2)
    records = [r for r in probe.drain_records() if r.error is None]
    assert len(records) >= 4
    for record in records:
        assert record.output_tokens == record.planned_output_tokens, repr(record)
        assert record.ttft_s is not None and record.finish_reason == "length"
        # A chunk a token, or fewer where SGLang merged tokens into one chunk (a lagging HTTP
        # handler; text that ends mid-character waits for the next); never more.
        assert record.chunk_count <= record.output_tokens, repr(record)


def test_the_meter_counts_the_chunks_of_a_real_sglang_chat_stream_that_carry_text(
    sglang_replica: SglangReplica,
) -> None:
    question = ({"role": "user", "content": "Say something."},)
    planned = PlannedRequest(None, None, question, None, 16)
    body = request_body("chat", "tiny-llama", planned, ignore_eos=True)
    events: list[dict[str, Any]] = []
    meter = StreamMeter(sent_at_s=time.monotonic())
    with httpx.stream("POST", f"{sglang_replica.url}/v1/chat/completions", json=body) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            meter.feed(f"{line}\n\n".encode(), time.monotonic())
            if line.startswith("data: {"):
                events.append(json.loads(line.removeprefix("data: ")))
    deltas = [e["choices"][0] for e in events if e.get("choices")]
    texts = [c for c in deltas[1:] if c["delta"].get("content") is not None]
    closing = deltas[-1]
    assert closing["finish_reason"] == "length" and closing["delta"].get("content") is None
    assert meter.chunk_count == len(texts) and meter.output_tokens == 16
