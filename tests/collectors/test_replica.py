"""The replica HTTP client against a real HTTP server on loopback: answers, failures, redirects,
the API key, and a kept-alive connection the replica closed."""

from __future__ import annotations

import json
import socket

import pytest

from slotop.collectors.errors import ReplicaUrlError, ScrapeError
from slotop.collectors.replica import (
    MAX_BODY_BYTES,
    Identity,
    ReplicaClient,
    normalize_base_url,
)
from tests.support.http_answers import Answer, Misbehave, Request, Respond, http_answers
from tests.support.paths import CAPTURES

FILES = {
    "/metrics": "vllm-0.32-cpu-load.txt",
    "/version": "vllm-0.32-cpu-version.json",
    "/v1/models": "vllm-0.32-cpu-models.json",
}


def _captured(request: Request) -> Answer:
    if request.path == "/health":
        return Answer(200)
    name = FILES.get(request.path)
    if name is None:
        return Answer(404, b"Not Found")
    return Answer(200, (CAPTURES / name).read_bytes())


def test_reads_every_endpoint_from_captures() -> None:
    with http_answers(_captured) as server, ReplicaClient(server.url) as client:
        assert client.metrics_text() == (CAPTURES / FILES["/metrics"]).read_text("utf-8")
        assert client.identity() == Identity("vllm", "0.32.0")
        assert client.served_models() == ("tiny-llama",)
        assert client.health().healthy
    assert server.connections == 1  # one kept-alive connection for all four
    assert [r.path for r in server.requests] == ["/metrics", "/version", "/v1/models", "/health"]


def _sglang(request: Request) -> Answer:
    """SGLang 0.5.23 as captured: no /version, its version and dials at /get_server_info."""
    endpoints = json.loads((CAPTURES / "sglang-0.5.23-cpu-endpoints.json").read_text("utf-8"))
    if request.path == "/get_server_info":
        return Answer(200, (CAPTURES / "sglang-0.5.23-cpu-server-info.json").read_bytes())
    answer = endpoints.get(request.path)
    if answer is None:
        return Answer(404, b'{"detail":"Not Found"}')
    return Answer(answer["status"], answer["body"].encode())


def test_sglang_says_who_it_is_at_get_server_info_not_version() -> None:
    with http_answers(_sglang) as server, ReplicaClient(server.url) as client:
        assert client.identity() == Identity("sglang", "0.5.23", "auto", "float32", 4096)
        assert client.served_models() == ("tiny-llama",)
    assert [r.path for r in server.requests] == ["/version", "/get_server_info", "/v1/models"]


def test_neither_engine_answering_raises_the_version_error() -> None:
    with (
        http_answers(lambda r: Answer(404, b"Not Found")) as server,
        pytest.raises(ScrapeError, match="/version"),
    ):
        ReplicaClient(server.url).identity()


def test_a_path_prefix_is_kept_before_each_endpoint() -> None:
    with http_answers(lambda r: Answer(200, b"")) as server:
        client = ReplicaClient(server.url + "/vllm/v1")
        client.metrics_text()
        client.health()
    assert [r.path for r in server.requests] == ["/vllm/metrics", "/vllm/health"]


def test_api_key_is_sent_as_bearer_and_only_when_given() -> None:
    with http_answers(lambda r: Answer(200, b"")) as server:
        with ReplicaClient(server.url, api_key="sk-test") as client:
            client.metrics_text()
        with ReplicaClient(server.url) as client:
            client.metrics_text()
        host = server.url.removeprefix("http://")
        with ReplicaClient(f"http://ops:p%40ss@{host}") as client:
            client.metrics_text()
    seen = [r.headers.get("authorization") for r in server.requests]
    assert seen == ["Bearer sk-test", None, "Basic b3BzOnBAc3M="]  # base64 of "ops:p@ss"


def test_a_connection_the_replica_closed_is_opened_again() -> None:
    """The replica hangs up on the second request of a kept-alive connection, having said
    nothing (as a restarted server or an idle timeout does): it goes out again on a fresh one."""
    with (
        http_answers(
            lambda r: (
                Misbehave("hang_up")
                if r.connection == 1 and len(server.requests) > 1
                else Answer(200, b"ok")
            )
        ) as server,
        ReplicaClient(server.url) as client,
    ):
        assert client.metrics_text() == "ok"
        assert client.metrics_text() == "ok"
    assert server.connections == 2


def _unused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_nothing_listening_is_cannot_connect() -> None:
    url = f"http://127.0.0.1:{_unused_port()}"
    with pytest.raises(ScrapeError, match="cannot connect") as caught:
        ReplicaClient(url).metrics_text()
    assert f"{url}/metrics" in str(caught.value)
    assert "Connection refused" in str(caught.value)


FAILURES = [
    pytest.param(Misbehave("stall", 1.0), "did not answer within 0.3 s", id="timeout"),
    pytest.param(Misbehave("cut"), "closed the connection", id="cut off mid-body"),
    pytest.param(Misbehave("hang_up"), "closed the connection", id="hung up"),
    pytest.param(Answer(500, b"boom\nstack"), "HTTP 500: 'boom'", id="500"),
    pytest.param(Answer(401), "API key", id="401"),
    pytest.param(Answer(404), "is this a vLLM or SGLang server", id="404"),
    pytest.param(
        Answer(307, headers=(("Location", "https://elsewhere/metrics"),)),
        "redirecting to https://elsewhere/metrics",
        id="redirect not followed",
    ),
    pytest.param(
        Answer(200, headers=(("Content-Length", str(MAX_BODY_BYTES + 1)),), close=True),
        "MiB",
        id="declared too large",
    ),
    pytest.param(Misbehave("endless"), "MiB", id="streamed too large"),
]


@pytest.mark.parametrize(("what", "words"), FAILURES)
def test_failures_become_scrape_errors_naming_the_url(what: Answer | Misbehave, words: str) -> None:
    # only the stall waits out its timeout; the rest get time to show what they are (streaming
    # 32 MiB to the size limit outran 0.3 s once on a loaded machine)
    stalls = isinstance(what, Misbehave) and what.how == "stall"
    with http_answers(lambda r: what) as server:
        client = ReplicaClient(server.url, timeout_s=0.3 if stalls else 10.0)
        with pytest.raises(ScrapeError, match=words) as caught:
            client.metrics_text()
    assert f"{server.url}/metrics" in str(caught.value)


def test_after_a_failure_the_next_request_starts_clean() -> None:
    answers: list[Answer | Misbehave] = [Misbehave("cut"), Answer(200, b"whole")]
    with http_answers(lambda r: answers.pop(0)) as server, ReplicaClient(server.url) as client:
        with pytest.raises(ScrapeError):
            client.metrics_text()
        assert client.metrics_text() == "whole"


def test_health_reports_instead_of_raising() -> None:
    with http_answers(lambda r: Answer(503, b"engine dead")) as server:
        unhealthy = ReplicaClient(server.url).health()
    unreachable = ReplicaClient(f"http://127.0.0.1:{_unused_port()}").health()
    assert (unhealthy.healthy, unhealthy.detail) == (False, "HTTP 503: engine dead")
    assert not unreachable.healthy and "cannot connect" in (unreachable.detail or "")


def _json(payload: object) -> Respond:
    return lambda r: Answer(
        200, json.dumps(payload).encode(), (("Content-Type", "application/json"),)
    )


def test_json_endpoints_tolerate_odd_shapes_and_refuse_non_json() -> None:
    with http_answers(_json({"data": [{"id": 3}, "x", {"id": "a"}]})) as server:
        assert ReplicaClient(server.url).served_models() == ("a",)
    with http_answers(_json([1])) as server:
        assert ReplicaClient(server.url).identity() == Identity("vllm", None)
    with http_answers(lambda r: Answer(200, b"<html>")) as server:
        client = ReplicaClient(server.url)
        with pytest.raises(ScrapeError, match="did not answer JSON"):
            client.identity()


def test_the_declared_charset_decodes_the_body() -> None:
    body = "# HELP vllm:x température\n".encode("latin-1")
    header = (("Content-Type", "text/plain; charset=iso-8859-1"),)
    with http_answers(lambda r: Answer(200, body, header)) as server:
        assert "température" in ReplicaClient(server.url).metrics_text()


URLS = [
    pytest.param("http://127.0.0.1:8000", "http://127.0.0.1:8000", id="plain"),
    pytest.param("127.0.0.1:8000", "http://127.0.0.1:8000", id="no scheme"),
    pytest.param("http://host:8000/metrics", "http://host:8000", id="metrics path"),
    pytest.param("https://host/vllm/v1/", "https://host/vllm", id="prefix kept, /v1 dropped"),
    pytest.param(" http://host:8000/ ", "http://host:8000", id="spaces and slash"),
]


@pytest.mark.parametrize(("given", "expected"), URLS)
def test_normalize_base_url(given: str, expected: str) -> None:
    assert normalize_base_url(given) == expected


@pytest.mark.parametrize(
    "bad", ["ftp://host/metrics", "http://", "http:///metrics", "http://host:port/"]
)
def test_unusable_urls_are_refused(bad: str) -> None:
    with pytest.raises(ReplicaUrlError):
        normalize_base_url(bad)
