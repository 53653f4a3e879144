"""The simulated replica over HTTP: streams, usage, metrics that add up, aborts, auth, shutdown."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from slotop.sim.defaults import resolve_engine_config
from slotop.sim.prompts import count_text_tokens
from slotop.sim.server import ServerThread
from slotop.sim.tables import gpu_by_name, model_by_name_or_path
from slotop.sim.types import ServeOptions
from tests.support.vllm_replica import free_port

MODEL = "sim-model"
MAX_MODEL_LEN = 2048
REPO_ROOT = Path(__file__).resolve().parents[2]


def _config() -> Any:
    return resolve_engine_config(
        model_by_name_or_path("llama-3.1-8b"),
        gpu_by_name("h100-sxm"),
        max_model_len=MAX_MODEL_LEN,
        seed=7,
    )


@pytest.fixture
def server() -> Iterator[ServerThread]:
    """A fresh simulated replica per test, so its counters start at zero."""
    with ServerThread(_config(), ServeOptions("127.0.0.1", 0, (MODEL,), None, 0.002)) as running:
        yield running


def _events(lines: Iterator[str]) -> list[Any]:
    """Parse an SSE body into JSON events, with "[DONE]" kept as a string."""
    events: list[Any] = []
    for line in lines:
        if line.startswith("data: "):
            payload = line[len("data: ") :]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
    return events


def _stream(client: httpx.Client, path: str, body: dict[str, Any]) -> list[Any]:
    with client.stream("POST", path, json={**body, "stream": True}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        return _events(response.iter_lines())


def _samples(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _metric(samples: dict[Any, float], name: str, **labels: str) -> float:
    key = (name, tuple(sorted({"model_name": MODEL, "engine": "0", **labels}.items())))
    return samples[key]


def test_a_stream_sends_one_chunk_per_token_then_usage_then_done(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        events = _stream(
            client,
            "/v1/completions",
            {
                "model": MODEL,
                "prompt": "the quick brown fox",
                "max_tokens": 12,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            },
        )
    assert events[-1] == "[DONE]"
    usage_event = events[-2]
    assert usage_event["choices"] == []
    tokens = events[:-2]
    assert len(tokens) == 12
    assert [e["choices"][0]["finish_reason"] for e in tokens] == [None] * 11 + ["length"]
    text = "".join(e["choices"][0]["text"] for e in tokens)
    assert all(e["choices"][0]["text"] for e in tokens)
    assert usage_event["usage"] == {
        "prompt_tokens": 1 + count_text_tokens("the quick brown fox"),
        "total_tokens": 1 + count_text_tokens("the quick brown fox") + 12,
        "completion_tokens": 12,
    }
    assert count_text_tokens(text) == 12
    assert len({e["id"] for e in events[:-1]}) == 1


def test_a_chat_stream_opens_with_the_assistant_role(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        events = _stream(
            client,
            "/v1/chat/completions",
            {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "ignore_eos": True},
        )
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert [e["choices"][0]["delta"]["content"] != "" for e in events[1:-1]] == [True] * 4
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["system_fingerprint"].startswith("vllm-0.32.0-")
    assert events[-1] == "[DONE]"
    assert events[0]["model"] == MODEL


def test_without_ignore_eos_a_request_may_stop_early(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=60.0) as client:
        answers = [
            client.post("/v1/completions", json={"prompt": [1, 2, 3], "max_tokens": 1000}).json()
            for _ in range(6)
        ]
    reasons = {a["choices"][0]["finish_reason"] for a in answers}
    assert "stop" in reasons
    for answer in answers:
        completion_tokens = answer["usage"]["completion_tokens"]
        if answer["choices"][0]["finish_reason"] == "stop":
            assert completion_tokens < 1000
        else:
            assert completion_tokens == 1000
        assert count_text_tokens(answer["choices"][0]["text"]) == completion_tokens


def test_n_and_batched_prompts_answer_one_choice_each(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        answer = client.post(
            "/v1/completions",
            json={"prompt": [[1, 2, 3], [4, 5]], "n": 2, "max_tokens": 3, "ignore_eos": True},
        ).json()
        events = _stream(
            client,
            "/v1/completions",
            {"prompt": [1, 2, 3], "n": 3, "max_tokens": 2, "ignore_eos": True},
        )
    assert [c["index"] for c in answer["choices"]] == [0, 1, 2, 3]
    assert answer["usage"] == {
        "prompt_tokens": 5,
        "total_tokens": 5 + 12,
        "completion_tokens": 12,
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }
    per_choice = [e["choices"][0]["index"] for e in events if e != "[DONE]"]
    assert sorted(per_choice) == [0, 0, 1, 1, 2, 2]
    assert events.count("[DONE]") == 1
    assert events[-1] == "[DONE]"


def test_metrics_add_up_after_concurrent_streams(server: ServerThread) -> None:
    prompts = [" ".join(["word"] * (10 + 37 * i)) for i in range(12)]
    max_tokens = [5 + 3 * i for i in range(12)]

    def one(i: int) -> list[Any]:
        with httpx.Client(base_url=server.url, timeout=60.0) as client:
            return _stream(
                client,
                "/v1/completions",
                {"prompt": prompts[i], "max_tokens": max_tokens[i], "ignore_eos": True},
            )

    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(one, range(12)))
    assert [len(events) - 1 for events in results] == max_tokens
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        samples = _samples(client)
    total_tokens = sum(max_tokens)
    prompt_tokens = sum(1 + count_text_tokens(p) for p in prompts)
    assert _metric(samples, "vllm:request_success_total", finished_reason="length") == 12
    assert _metric(samples, "vllm:generation_tokens_total") == total_tokens
    assert _metric(samples, "vllm:prompt_tokens_total") == prompt_tokens
    assert _metric(samples, "vllm:request_prompt_tokens_sum") == prompt_tokens
    assert _metric(samples, "vllm:time_to_first_token_seconds_count") == 12
    assert _metric(samples, "vllm:inter_token_latency_seconds_count") == total_tokens - 12
    assert _metric(samples, "vllm:e2e_request_latency_seconds_count") == 12
    assert _metric(samples, "vllm:num_requests_running") == 0
    assert _metric(samples, "vllm:num_requests_waiting") == 0
    assert _metric(samples, "vllm:kv_cache_usage_perc") == 0
    assert samples[("slotop_sim_token_lag_seconds_count", ())] == total_tokens
    http_key = (
        "http_requests_total",
        (("handler", "/v1/completions"), ("method", "POST"), ("status", "2xx")),
    )
    assert samples[http_key] == 12


def test_a_client_that_goes_away_frees_its_request(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        body = {"prompt": [1, 2, 3], "max_tokens": 1500, "ignore_eos": True, "stream": True}
        with client.stream("POST", "/v1/completions", json=body) as response:
            received = 0
            for line in response.iter_lines():
                received += line.startswith("data: ")
                if received == 3:
                    break
        deadline = time.monotonic() + 20.0
        while True:
            samples = _samples(client)
            if _metric(samples, "vllm:num_requests_running") == 0:
                break
            assert time.monotonic() < deadline, "the aborted request still runs"
            time.sleep(0.05)
    assert _metric(samples, "vllm:request_success_total", finished_reason="length") == 0
    assert _metric(samples, "vllm:request_success_total", finished_reason="abort") == 0
    assert _metric(samples, "vllm:kv_cache_usage_perc") == 0


def test_the_request_id_header_names_the_response(server: ServerThread) -> None:
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        answer = client.post(
            "/v1/completions",
            json={"prompt": [1], "max_tokens": 1},
            headers={"X-Request-Id": "abc123"},
        ).json()
    assert answer["id"] == "cmpl-abc123"


def test_an_api_key_guards_v1_but_not_health_or_metrics() -> None:
    options = ServeOptions("127.0.0.1", 0, (MODEL,), "k3y", 0.002)
    with ServerThread(_config(), options) as running, httpx.Client(base_url=running.url) as client:
        assert client.get("/v1/models").status_code == 401
        assert client.get("/v1/models", headers={"Authorization": "Bearer wrong"}).json() == {
            "error": "Unauthorized"
        }
        assert client.get("/v1/models", headers={"Authorization": "Bearer k3y"}).status_code == 200
        assert client.get("/health").status_code == 200
        assert client.get("/metrics").status_code == 200


def _start_subprocess(port: int) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.Popen(
        [sys.executable, "-m", "slotop.sim", "--port", str(port), "--max-model-len", "2048"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_healthy(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30.0
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[0]
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    pytest.fail("the simulated replica never answered /health")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.slow
def test_a_signal_ends_open_streams_and_the_process_cleanly(signum: int) -> None:
    port = free_port()
    process = _start_subprocess(port)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(url, process)
        body = {"prompt": [1, 2], "max_tokens": 1500, "ignore_eos": True, "stream": True}
        with (
            httpx.Client(base_url=url, timeout=30.0) as client,
            client.stream("POST", "/v1/completions", json=body) as response,
        ):
            lines = response.iter_lines()
            assert next(line for line in lines if line.startswith("data: "))
            process.send_signal(signum)
            with pytest.raises(httpx.HTTPError):
                for _ in lines:
                    pass
        output, _ = process.communicate(timeout=15.0)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0
    assert "Application startup complete." in output
    assert f"http://127.0.0.1:{port}" in output


def test_the_stats_line_reports_throughput_and_occupancy_as_vllm_logs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from slotop.sim.server import SimServer

    async def run() -> None:
        server = SimServer(_config(), ServeOptions("127.0.0.1", 0, (MODEL,), None, 0.002))
        server.engine.submit("a", 100, 5, True, 0.0)
        task = asyncio.get_running_loop().create_task(server.log_stats_forever(0.01))
        await asyncio.sleep(0.005)
        server.engine.step(0.0)
        await asyncio.sleep(0.012)
        task.cancel()

    with caplog.at_level(logging.INFO, logger="slotop.sim"):
        asyncio.run(run())
    assert caplog.messages[0] == (
        "Engine 000: Avg prompt throughput: 10000.0 tokens/s, Avg generation throughput: "
        "100.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, "
        "Prefix cache hit rate: 0.0%"
    )


def test_an_unexpected_failure_answers_500_in_vllm_shape(
    server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object) -> None:
        raise RuntimeError("engine exploded")

    assert server.server is not None
    monkeypatch.setattr(server.server, "_final_body", broken)
    with httpx.Client(base_url=server.url, timeout=30.0) as client:
        response = client.post("/v1/completions", json={"prompt": [1], "max_tokens": 1})
    assert response.status_code == 500
    assert response.json() == {
        "error": {
            "message": "engine exploded",
            "type": "InternalServerError",
            "param": None,
            "code": 500,
        }
    }


_SLICE_PROBE = """
import sys
from slotop.sim.server import ask_for_short_slices
took = ask_for_short_slices(float(sys.argv[1]))
line = next(l for l in open("/proc/thread-self/sched") if l.startswith("se.slice"))
print(took, int(line.split(":")[1]))
"""


def _kernel_takes_custom_slices() -> bool:
    """Linux 6.12 or later, whose EEVDF scheduler takes a task's own slice, and shows it."""
    if not sys.platform.startswith("linux"):
        return False
    version = re.match(r"(\d+)\.(\d+)", os.uname().release)
    if version is None:
        return False
    major, minor = int(version[1]), int(version[2])
    sched = Path("/proc/thread-self/sched")
    return (major, minor) >= (6, 12) and sched.exists() and "se.slice" in sched.read_text()


@pytest.mark.skipif(
    not _kernel_takes_custom_slices(), reason="the kernel takes no custom slice (Linux < 6.12)"
)
@pytest.mark.slow
def test_the_server_asks_the_scheduler_for_short_slices_at_normal_priority() -> None:
    probe = subprocess.run(
        [sys.executable, "-c", _SLICE_PROBE, "250e-6"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    took, slice_ns = probe.stdout.split()
    assert took == "True"
    assert int(slice_ns) == 250_000
