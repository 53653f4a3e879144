"""The simulated SGLang replica over HTTP: its server info, start-up, key, /metrics and the
inter-token histogram as its clients' tokens fill it (real time, one server thread per test)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from slotop.sim.sglang import server as sglang_server
from tests.support.paths import CAPTURES
from tests.support.sglang_sim import running


@pytest.fixture(autouse=True)
def quick_health(monkeypatch: pytest.MonkeyPatch) -> None:
    """SGLang's health check waits a second; these tests need not."""
    monkeypatch.setattr(sglang_server, "HEALTH_WAIT_S", 0.01)


def test_server_info_reports_the_flags_given() -> None:
    flags = (
        "--max-running-requests=6",
        "--chunked-prefill-size=1024",
        "--page-size=16",
        "--kv-cache-dtype=fp8_e4m3",
        "--max-total-tokens=20010",
        "--mem-fraction-static=0.75",
        "--context-length=4096",
    )
    with running(*flags) as (url, _):
        info = httpx.get(f"{url}/get_server_info").json()
    assert info["version"] == "0.5.23"
    assert info["model_path"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert info["served_model_name"] == "tiny-llama"
    assert info["max_running_requests"] == 6
    assert info["chunked_prefill_size"] == 1024
    assert info["page_size"] == 16
    assert info["kv_cache_dtype"] == "fp8_e4m3"
    assert info["max_total_tokens"] == 20010
    assert info["mem_fraction_static"] == 0.75
    assert info["context_length"] == 4096
    assert info["max_total_num_tokens"] == 20000  # whole pages of 16
    assert info["max_req_input_len"] == 4096 - 1 - 5
    state = info["internal_states"][0]
    assert state["effective_max_running_requests_per_dp"] == 6
    assert state["memory_usage"]["token_capacity"] == 20000
    assert state["memory_usage"]["kvcache"] == round(20000 * 65536 / 2**30, 3)


def test_unset_flags_read_as_sglang_reports_them() -> None:
    with running() as (url, _):
        info = httpx.get(f"{url}/server_info").json()
    assert info["max_running_requests"] is None
    assert info["context_length"] is None
    assert info["max_total_tokens"] is None
    assert info["chunked_prefill_size"] == 8192
    assert info["internal_states"][0]["effective_max_running_requests_per_dp"] == 2048


def test_health_is_503_until_the_warm_up_and_the_warm_up_is_counted() -> None:
    with running("--enable-metrics", warm_up_after_s=0.3) as (url, server):
        assert httpx.get(f"{url}/health").status_code == 503
        deadline = time.monotonic() + 10
        while not server.ready and time.monotonic() < deadline:
            time.sleep(0.01)
        health = httpx.get(f"{url}/health")
        page = httpx.get(f"{url}/metrics").text
    assert (health.status_code, health.content) == (200, b"")
    families = {family.name: family for family in text_string_to_metric_families(page)}
    (requests,) = families["sglang:num_requests"].samples
    assert (requests.labels["is_streaming"], requests.value) == ("false", 1)
    (tokens,) = families["sglang:generation_tokens"].samples
    assert tokens.value == 8
    served = {
        (s.labels["endpoint"], s.labels["method"], s.labels["status_code"])
        for s in families["sglang:http_responses"].samples
    }
    assert {("/model_info", "GET", "200"), ("/generate", "POST", "200")} <= served
    assert ("/health", "GET", "503") in served
    # As on the real server after its warm-up: every family but the inter-token histogram,
    # which no output after a first has filled yet.
    capture = (CAPTURES / "sglang-0.5.23-cpu-idle.txt").read_text(encoding="utf-8")
    idle = {family.name for family in text_string_to_metric_families(capture)}
    assert {name for name in families if name.startswith("sglang:")} == idle


def test_without_enable_metrics_there_is_no_metrics_route() -> None:
    with running() as (url, _):
        response = httpx.get(f"{url}/metrics")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}


def test_the_api_key_guards_all_but_health_and_metrics() -> None:
    with running("--api-key=k", "--enable-metrics") as (url, _):
        assert httpx.get(f"{url}/health").status_code == 200
        assert httpx.get(f"{url}/metrics").status_code == 200
        for path in ("/v1/models", "/get_server_info", "/get_model_info", "/nope"):
            refused = httpx.get(f"{url}{path}")
            assert (refused.status_code, refused.json()) == (401, {"error": "Unauthorized"})
        allowed = httpx.get(f"{url}/v1/models", headers={"Authorization": "Bearer k"})
    assert allowed.status_code == 200
    assert allowed.json()["data"][0]["owned_by"] == "sglang"


def test_one_model_is_listed_and_found_by_name() -> None:
    with running("--context-length=4096") as (url, _):
        card = httpx.get(f"{url}/v1/models/tiny-llama").json()
        missing = httpx.get(f"{url}/v1/models/other")
    assert (card["id"], card["max_model_len"], card["owned_by"]) == ("tiny-llama", 4096, "sglang")
    assert missing.status_code == 404


def test_streamed_tokens_fill_the_inter_token_histogram_one_each() -> None:
    body = {"prompt": [5, 6, 7, 8], "max_tokens": 5, "ignore_eos": True}
    with running("--enable-metrics") as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        for _ in range(3):
            with client.stream("POST", "/v1/completions", json={**body, "stream": True}) as answer:
                chunks = [line for line in answer.iter_lines() if line.startswith("data: {")]
            assert len(chunks) == 5
        client.post("/v1/completions", json={**body, "max_tokens": 60})
        page = client.get("/metrics").text
    families = {family.name: family for family in text_string_to_metric_families(page)}
    itl = families["sglang:inter_token_latency_seconds"]
    (count,) = [s.value for s in itl.samples if s.name.endswith("_count")]
    # 3 streams of 5 tokens: 4 each after the first; 60 non-streamed: the 10 past the 50th;
    # the warm-up's 8 non-streamed: none.
    assert count == 3 * 4 + 10
    generated = {
        s.labels["is_streaming"]: s.value for s in families["sglang:generation_tokens"].samples
    }
    assert generated == {"true": 15, "false": 8 + 60}


@pytest.mark.slow
def test_the_sim_runs_standalone_as_sglang_with_its_start_up_lines() -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "slotop.sim", "--engine", "sglang", "--port", "0",
         "--enable-metrics", "--max-running-requests", "8"],
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert server.stderr is not None
        lines = []
        for line in server.stderr:
            lines.append(line)
            if "The server is fired up and ready to roll!" in line:
                break
        text = "".join(lines)
        assert "KV Cache is allocated. dtype: torch.bfloat16, #tokens: " in text
        assert "max_running_requests=8, context_len=131072" in text
        (url,) = re.findall(r"Uvicorn running on (http://\S+)", text)
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
        assert "sglang:num_running_reqs" in httpx.get(f"{url}/metrics").text
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_a_client_that_goes_away_is_counted_as_an_abort() -> None:
    body = {"prompt": [5, 6, 7, 8], "max_tokens": 2000, "ignore_eos": True, "stream": True}
    with running("--enable-metrics") as (url, _), httpx.Client(base_url=url, timeout=30) as client:
        assert "sglang:num_aborted_requests" not in client.get("/metrics").text
        with client.stream("POST", "/v1/completions", json=body) as answer:
            lines = answer.iter_lines()
            assert next(lines).startswith("data: {")
        deadline = time.monotonic() + 10
        page = ""
        while time.monotonic() < deadline and "num_aborted_requests_total" not in page:
            time.sleep(0.05)
            page = client.get("/metrics").text
    families = {family.name: family for family in text_string_to_metric_families(page)}
    (aborted,) = families["sglang:num_aborted_requests"].samples
    assert aborted.value == 1
    assert aborted.labels == {"engine_type": "unified", "model_name": "tiny-llama"}
    (running_now,) = families["sglang:num_running_reqs"].samples
    assert running_now.value == 0


def test_v1_loads_counts_what_the_scheduler_holds_when_asked() -> None:
    flags = ("--max-running-requests=2", "--max-total-tokens=20000", "--page-size=16")
    body = {"prompt": [5] * 40, "max_tokens": 2000, "ignore_eos": True, "stream": True}
    with (
        running(*flags) as (url, _),
        httpx.Client(base_url=url, timeout=30) as client,
        contextlib.ExitStack() as streams,
    ):
        for _ in range(3):  # two run, one waits for a place
            answer = streams.enter_context(client.stream("POST", "/v1/completions", json=body))
            assert answer.status_code == 200
        deadline = time.monotonic() + 10
        while True:
            (load,) = client.get("/v1/loads").json()["loads"]
            if load["num_running_reqs"] + load["num_waiting_reqs"] == 3:
                break
            assert time.monotonic() < deadline, load
            time.sleep(0.02)
    assert (load["num_running_reqs"], load["num_waiting_reqs"]) == (2, 1)
    assert (load["max_total_num_tokens"], load["max_running_requests"]) == (20000, 2)
    assert load["num_used_tokens"] > 0 and load["num_used_tokens"] % 16 == 0
