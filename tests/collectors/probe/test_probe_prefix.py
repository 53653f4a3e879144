"""A shared prompt prefix from the probe shows as a prefix-cache hit ratio, on the sim and on vLLM.

By hand: a prompt of P shared prefix tokens and R own tokens, 16-token blocks, P a multiple of 16.
Once the prefix is cached, a request that shares it hits P tokens of its P + R, one that does not
hits none: over many requests the hit ratio is share × P / (P + R).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from slotop.collectors.monitor import ReplicaMonitor
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.replica import ReplicaClient
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow

PREFIX_TOKENS = 1024
OWN_TOKENS = 64


def shape(
    ratio: float, prefix_tokens: int = PREFIX_TOKENS, own_tokens: int = OWN_TOKENS
) -> LoadShape:
    return LoadShape(
        prompt_lengths=LengthDistribution("fixed", own_tokens),
        output_lengths=LengthDistribution("fixed", 4),
        max_concurrency=16,
        shared_prefix_tokens=prefix_tokens,
        shared_prefix_ratio=ratio,
    )


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    yield from run_sim()


def wait_until(probe: Probe, predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met; status {probe.status()}"
        probe.wait_for_batch(0.2)


def done_total(probe: Probe) -> int:
    status = probe.status()
    return 0 if status is None else status.done_total


def counter(url: str, name: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5).text
    match = re.search(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.MULTILINE)
    assert match is not None, f"{name} is not served"
    return float(match.group(1))


def hit_ratio_under_load(url: str, load: LoadShape, warm_up: int, measured: int) -> float | None:
    """The snapshot's prefix-cache hit ratio over `measured` requests sent after `warm_up`."""
    with ReplicaClient(url) as client, Probe.start(ProbeTarget(url), load, concurrency=8) as probe:
        monitor = ReplicaMonitor(client, long_window_s=600.0, interval_s=1.0)
        wait_until(probe, lambda: done_total(probe) >= warm_up)
        monitor.poll()
        wait_until(probe, lambda: done_total(probe) >= warm_up + measured)
        return monitor.poll().window.prefix_cache_hit_ratio


def test_the_sim_serves_rising_hits_and_the_snapshot_reads_every_shared_prefix_hit(
    sim_url: str,
) -> None:
    before = counter(sim_url, "vllm:prefix_cache_hits_total")
    ratio = hit_ratio_under_load(sim_url, shape(1.0), warm_up=16, measured=64)
    assert counter(sim_url, "vllm:prefix_cache_hits_total") >= before + 64 * PREFIX_TOKENS
    # Every request in the window hits its 1024 prefix tokens of 1088: 1024 / 1088 = 0.94118.
    assert ratio == pytest.approx(1024 / 1088, abs=1e-4)


def test_with_half_the_requests_sharing_the_ratio_is_half_the_prefix_share(sim_url: str) -> None:
    ratio = hit_ratio_under_load(sim_url, shape(0.5), warm_up=16, measured=400)
    # 0.5 × 1024 / 1088 = 0.4706; the share is Binomial(≈400, 0.5): σ ≈ 0.025 × 0.94 ≈ 0.024.
    assert ratio is not None
    assert ratio == pytest.approx(0.5 * 1024 / 1088, abs=0.1)


def test_a_prefix_that_is_not_whole_blocks_hits_only_its_whole_blocks(sim_url: str) -> None:
    # 70 shared tokens: 4 whole blocks (64 tokens) match; the 6 left share a block with own ones.
    ratio = hit_ratio_under_load(sim_url, shape(1.0, 70, 58), warm_up=16, measured=64)
    assert ratio == pytest.approx(64 / 128, abs=1e-4)


def test_without_prefix_caching_the_sim_serves_no_queries_or_hits() -> None:
    for url in run_sim("--no-enable-prefix-caching"):
        with Probe.start(ProbeTarget(url), shape(1.0), concurrency=4) as probe:
            wait_until(probe, lambda: done_total(probe) >= 16)
        assert counter(url, "vllm:prefix_cache_queries_total") == 0
        assert counter(url, "vllm:prefix_cache_hits_total") == 0
        info = httpx.get(url + "/metrics", timeout=5).text
        assert 'enable_prefix_caching="False"' in info


@pytest.mark.vllm
def test_the_shared_prefix_hits_the_real_vllm_prefix_cache(vllm_replica: Any) -> None:
    # The CPU replica's blocks hold 128 tokens: a 256-token prefix is 2 whole blocks, so each
    # request after the first hits 256 of its 288 tokens (the first may find it cached already).
    url = vllm_replica.url
    assert 'enable_prefix_caching="True"' in httpx.get(url + "/metrics", timeout=5).text
    queries = counter(url, "vllm:prefix_cache_queries_total")
    hits = counter(url, "vllm:prefix_cache_hits_total")
    with Probe.start(ProbeTarget(url), shape(1.0, 256, 32), concurrency=1) as probe:
        wait_until(probe, lambda: done_total(probe) >= 4, timeout_s=120.0)
    assert [r.ok for r in probe.drain_records()][:4] == [True] * 4
    queried = counter(url, "vllm:prefix_cache_queries_total") - queries
    hit = counter(url, "vllm:prefix_cache_hits_total") - hits
    requests = queried / 288
    assert requests >= 4 and requests == int(requests)
    assert (requests - 1) * 256 <= hit <= requests * 256
