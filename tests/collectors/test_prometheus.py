"""The Prometheus client: answers parsed, every failure mapped once, credentials never shown."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from slotop.collectors.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusQueryError,
    PrometheusRefused,
    PrometheusUnavailable,
    normalize_prometheus_url,
    read_auth,
)

SECRET = "s3cr3t-t0ken-value"
URL = "http://prom.test:9090"


def client(
    handler: Callable[[httpx.Request], httpx.Response], **kwargs: object
) -> PrometheusClient:
    return PrometheusClient(URL, transport=httpx.MockTransport(handler), **kwargs)  # type: ignore[arg-type]


def answer(data: dict[str, object], warnings: list[str] | None = None) -> httpx.Response:
    body: dict[str, object] = {"status": "success", "data": data}
    if warnings:
        body["warnings"] = warnings
    return httpx.Response(200, json=body)


def test_an_instant_vector_is_read_with_its_labels_nan_included() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return answer(
            {
                "resultType": "vector",
                "result": [
                    {"metric": {"instance": "a:1", "__name__": "up"}, "value": [1.5, "1"]},
                    {"metric": {"instance": "b:1"}, "value": [1.5, "NaN"]},
                ],
            },
            warnings=["partial response"],
        )

    with client(handler, timeout_s=3.0) as prometheus:
        got = prometheus.instant("up", at_s=1700000000.25)
    assert [s.label("instance") for s in got.samples] == ["a:1", "b:1"]
    assert got.samples[0].value == 1.0 and got.samples[0].label("__name__") == "up"
    assert got.samples[1].value != got.samples[1].value  # NaN stays NaN
    assert got.warnings == ("partial response",)
    form = dict(httpx.QueryParams(seen[0].content.decode()))
    assert seen[0].url.path == "/api/v1/query" and seen[0].method == "POST"
    assert form == {"query": "up", "time": "1700000000.250", "timeout": "3s"}


def test_a_range_query_reads_points() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/query_range"
        return answer(
            {
                "resultType": "matrix",
                "result": [{"metric": {"job": "v"}, "values": [[10, "1"], [11, "2.5"]]}],
            }
        )

    got = client(handler).range("rate(x[1m])", 10.0, 11.0, 1.0)
    assert got.series[0].points == ((10.0, 1.0), (11.0, 2.5))


@pytest.mark.parametrize(
    ("response", "error", "words"),
    [
        pytest.param(
            httpx.Response(
                400, json={"status": "error", "errorType": "bad_data", "error": "parse error"}
            ),
            PrometheusQueryError,
            "refused the query 'up{' (bad_data: parse error)",
            id="bad query",
        ),
        pytest.param(
            httpx.Response(
                503, json={"status": "error", "errorType": "timeout", "error": "query timed out"}
            ),
            PrometheusUnavailable,
            "could not run",
            id="server-side timeout",
        ),
        pytest.param(
            httpx.Response(502, text="<html>Bad Gateway</html>"),
            PrometheusUnavailable,
            "without JSON",
            id="a proxy's error page",
        ),
        pytest.param(
            httpx.Response(404, json={"detail": "Not Found"}),
            PrometheusUnavailable,
            "does not answer the Prometheus HTTP API: POST /api/v1/query got HTTP 404",
            id="a replica's 404",
        ),
        pytest.param(
            httpx.Response(404, text="404 page not found"),
            PrometheusUnavailable,
            "not a replica's",
            id="a wrong path's 404",
        ),
        pytest.param(
            httpx.Response(200, json={"data": {}}),
            PrometheusUnavailable,
            "the Prometheus server's own base URL",
            id="JSON without a status",
        ),
        pytest.param(
            httpx.Response(401, text="unauthorized"), PrometheusRefused, "refused slotop", id="401"
        ),
        pytest.param(
            httpx.Response(302, headers={"location": "http://login.test/"}),
            PrometheusUnavailable,
            "redirecting to http://login.test/",
            id="redirect",
        ),
    ],
)
def test_answers_that_are_no_result_map_to_one_error_each(
    response: httpx.Response, error: type[PrometheusError], words: str
) -> None:
    with pytest.raises(error) as caught:
        client(lambda _: response).instant("up{")
    assert words in str(caught.value)
    assert URL in str(caught.value)


@pytest.mark.parametrize(
    ("raised", "words"),
    [
        (httpx.ConnectError("refused"), "cannot connect"),
        (httpx.ReadTimeout("slow"), "did not answer within 4 s"),
        (httpx.RemoteProtocolError("cut"), "RemoteProtocolError"),
    ],
)
def test_transport_failures_are_unavailable(raised: Exception, words: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    with pytest.raises(PrometheusUnavailable, match=words):
        client(handler, timeout_s=3.0).instant("up")


def test_a_bearer_token_from_a_file_is_sent_and_never_shown(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(SECRET + "\n", encoding="utf-8")
    auth = read_auth(bearer_token_file=str(token_file))
    assert auth is not None and SECRET not in repr(auth)
    headers: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        headers.append(request.headers["authorization"])
        return httpx.Response(403, text="denied")

    with pytest.raises(PrometheusRefused) as caught:
        client(handler, auth=auth).instant("up")
    assert headers == [f"Bearer {SECRET}"]
    assert SECRET not in str(caught.value)
    assert str(token_file) in str(caught.value)


def test_basic_auth_from_the_environment() -> None:
    auth = read_auth(basic_auth_env="PROM_AUTH", environ={"PROM_AUTH": f"ops:{SECRET}"})
    assert auth is not None and auth.basic_user == "ops"
    sent: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.headers["authorization"])
        return answer({"resultType": "vector", "result": []})

    client(handler, auth=auth).instant("up")
    assert sent == [httpx.BasicAuth("ops", SECRET)._auth_header]  # httpx's own encoding
    assert SECRET not in repr(auth)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"bearer_token_file": "/nonexistent/token"}, "cannot read the bearer token file"),
        ({"bearer_token_env": "UNSET_VARIABLE"}, "UNSET_VARIABLE"),
        ({"basic_auth_env": "PROM_AUTH"}, "not `user:password`"),
    ],
)
def test_unusable_credentials_say_where_they_were_looked_for(
    kwargs: dict[str, str], words: str
) -> None:
    with pytest.raises(PrometheusRefused, match=words) as caught:
        read_auth(environ={"PROM_AUTH": SECRET}, **kwargs)  # type: ignore[arg-type]
    assert SECRET not in str(caught.value)


def test_no_credentials_named_is_none() -> None:
    assert read_auth(environ={}) is None


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("prom:9090", "http://prom:9090"),
        ("https://prom.test/prometheus/", "https://prom.test/prometheus"),
        ("http://prom:9090/api/v1/query", "http://prom:9090"),
    ],
)
def test_urls_are_normalised(url: str, expected: str) -> None:
    assert normalize_prometheus_url(url) == expected


def test_a_url_with_credentials_is_refused_without_echoing_them() -> None:
    with pytest.raises(PrometheusError) as caught:
        normalize_prometheus_url(f"http://ops:{SECRET}@prom:9090")
    assert SECRET not in str(caught.value) and "basic_auth_file" in str(caught.value)


def test_a_body_that_is_not_an_api_answer() -> None:
    with pytest.raises(PrometheusUnavailable, match="does not answer the Prometheus HTTP API"):
        client(lambda _: httpx.Response(200, content=json.dumps([1, 2]))).instant("up")
