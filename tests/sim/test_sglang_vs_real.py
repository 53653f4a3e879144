"""In SGLang mode the sim answers the same requests with the same statuses, shapes and errors as
a real SGLang 0.5.23 server.

`fixtures/sglang-0.5.23-cpu-api.json` holds the real server's answers to the probes of
`tests/support/sglang_api_probes.py` (the tiny Llama served as `tiny-llama`, with an API key, a
4,096-token pool, a 2,048-token context and a 4,096-token prefill chunk; `capture_sglang_api.py`
beside it remakes the file). The sim serves Llama-3.1-8B on an H100 under the same name and
limits. Values that depend on the tokenizer, the model or the clock are compared by type only;
statuses, content types, keys and their order, finish reasons and error texts exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from slotop.sim.server import ServerThread
from slotop.sim.sglang import server as sglang_server
from slotop.sim.sglang.flags import build_parser, replica_from_args
from slotop.sim.sglang.server import SglangServer
from slotop.sim.types import ServeOptions
from tests.support.sglang_api_probes import (
    API_KEY,
    CONTEXT_LENGTH,
    MAX_TOTAL_TOKENS,
    MODEL,
    PROBES,
    Probe,
    ask,
    comparable,
)

FIXTURE = Path(__file__).parent / "fixtures" / "sglang-0.5.23-cpu-api.json"
FLAGS = (
    f"--served-model-name={MODEL}",
    f"--api-key={API_KEY}",
    f"--context-length={CONTEXT_LENGTH}",
    f"--max-total-tokens={MAX_TOTAL_TOKENS}",
    "--chunked-prefill-size=4096",
    "--enable-metrics",
)


@pytest.fixture(scope="module")
def sim_answers() -> Iterator[dict[str, dict[str, Any]]]:
    """Every probe's answer from a simulated SGLang replica set up like the captured one."""
    replica = replica_from_args(build_parser().parse_args(list(FLAGS)))
    options = ServeOptions("127.0.0.1", 0, (MODEL,), API_KEY, 0.05)
    thread = ServerThread(
        replica.engine, options, make=lambda: SglangServer(replica, options, warm_up_after_s=0.0)
    )
    # SGLang's health check waits a second before it answers; three probes need not.
    with pytest.MonkeyPatch.context() as patch, thread:
        patch.setattr(sglang_server, "HEALTH_WAIT_S", 0.01)
        server = thread.server
        assert isinstance(server, SglangServer)
        deadline = time.monotonic() + 10
        while not server.ready and time.monotonic() < deadline:
            time.sleep(0.01)
        with httpx.Client(base_url=thread.url, timeout=30.0) as client:
            yield {probe.name: ask(client, probe) for probe in PROBES}


def test_the_fixture_answers_every_probe() -> None:
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    assert set(recorded) == {probe.name for probe in PROBES}


@pytest.mark.parametrize("probe", PROBES, ids=lambda probe: probe.name)
def test_the_sim_answers_like_the_captured_server(
    probe: Probe, sim_answers: dict[str, dict[str, Any]]
) -> None:
    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))[probe.name]
    assert comparable(sim_answers[probe.name], probe) == comparable(recorded, probe)


def test_the_metrics_scrape_is_open_and_counts_requests_as_sglang_does(
    sim_answers: dict[str, dict[str, Any]],
) -> None:
    """Requests the API key refused are not counted; a 404 and a 405 count under the raw path."""
    from prometheus_client.parser import text_string_to_metric_families

    def counted(answer: dict[str, Any]) -> dict[tuple[str, ...], float]:
        families = text_string_to_metric_families(answer["body"])
        responses = next(f for f in families if f.name == "sglang:http_responses")
        return {
            (s.labels["endpoint"], s.labels["method"], s.labels["status_code"]): s.value
            for s in responses.samples
        }

    recorded = json.loads(FIXTURE.read_text(encoding="utf-8"))
    sim, real = counted(sim_answers["metrics"]), counted(recorded["metrics"])
    assert sim_answers["metrics"]["status"] == 200
    # The real server's count holds the capture script's own /health polls before start-up.
    del real[("/health", "GET", "503")]
    real[("/health", "GET", "200")] = sim[("/health", "GET", "200")]
    assert sim == real
