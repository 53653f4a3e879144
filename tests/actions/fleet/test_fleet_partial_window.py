"""A Prometheus started moments ago holds less than the window: the fleet says so, and its rates
are over what is there, against the replica's own counter read directly over the same span.

The replica is the simulated one under the probe's steady load from before the server starts;
the expected tokens/s is the difference of its `vllm:generation_tokens_total` between two reads
of its /metrics, parsed by the test itself.
"""

from __future__ import annotations

import contextlib
import json
import re
import time

import httpx
import pytest

from slotop.cli import main
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.config import Settings, with_overrides
from tests.support.prometheus_server import run_prometheus
from tests.support.sim_fleet import refreshed_once
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

WINDOW_S = 60.0
AFTER_START_S = 10.0
_TOKENS = re.compile(r"^vllm:generation_tokens_total(?:\{[^}]*\})? (\S+)$", re.MULTILINE)


def _tokens(url: str) -> tuple[float, float]:
    """The replica's generated tokens so far (its engines summed), and when they were read."""
    text = httpx.get(f"{url}/metrics", timeout=5).text
    return time.time(), sum(float(value) for value in _TOKENS.findall(text))


def test_a_fresh_prometheus_is_a_partial_window_with_rates_over_what_is_there(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", 64),
        output_lengths=LengthDistribution("fixed", 64),
        max_concurrency=16,
        max_rate_rps=100.0,
    )
    with contextlib.contextmanager(run_sim)() as url:
        probe = Probe.start(ProbeTarget(url), shape, concurrency=4)
        try:
            time.sleep(3.0)  # the load is steady before the server starts
            target = url.removeprefix("http://")
            with contextlib.contextmanager(run_prometheus)([target]) as prometheus:
                prometheus.wait_for_up(1)
                started, first = _tokens(url)
                time.sleep(AFTER_START_S)
                settings = with_overrides(
                    Settings(), {"fleet.prometheus_url": prometheus.url, "window.long_s": WINDOW_S}
                )
                table = refreshed_once(settings)
                ended, last = _tokens(url)
                raw = httpx.get(
                    f"{prometheus.url}/api/v1/query",
                    params={"query": "sum(rate(vllm:generation_tokens_total[60s]))"},
                ).json()["data"]["result"]
                code = main(["fleet", "--prometheus", prometheus.url, "--json", "--window", "60"])
                data = json.loads(capsys.readouterr().out)
                short = main(["fleet", "--prometheus", prometheus.url, "--json", "--window", "4"])
                whole = json.loads(capsys.readouterr().out)
        finally:
            probe.stop()
    direct = (last - first) / (ended - started)
    assert direct > 50  # the load ran: a rate worth comparing
    # The premise: Prometheus's own rate over the window reads far below what the replica did.
    assert float(raw[0]["value"][1]) < 0.6 * direct
    (row,) = table.rows
    (model,) = table.models
    assert row.covered_s is not None and AFTER_START_S - 2 < row.covered_s < AFTER_START_S + 8
    assert model.covered_s == row.covered_s
    assert row.generation_tokens_per_s == pytest.approx(direct, rel=0.2)
    assert model.generation_tokens_per_s == pytest.approx(direct, rel=0.2)
    assert code == 0
    assert data["replicas"][0]["partial_window"] is True and data["models"][0]["partial_window"]
    assert data["replicas"][0]["throughput"]["generation_tokens_per_s"] == pytest.approx(
        direct, rel=0.2
    )
    # A window the server holds whole is no partial one.
    assert short == 0 and whole["replicas"][0]["partial_window"] is False
    assert whole["replicas"][0]["covered_s"] is None
