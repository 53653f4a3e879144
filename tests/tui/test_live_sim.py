"""The app against a live simulated replica: real client, monitor, feed and (spawned) probe."""

from __future__ import annotations

import multiprocessing
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from slotop.actions.slo import Verdict
from slotop.config import Settings
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.server import ServerThread
from slotop.sim.tables import gpu_by_name, model_by_name_or_path
from slotop.sim.types import ServeOptions
from slotop.tui.run import build_app, with_url
from tests.support.http_answers import Misbehave, http_answers
from tests.support.pilot import wait_until

pytestmark = pytest.mark.anyio


@pytest.fixture
def sim_url() -> Iterator[str]:
    config = resolve_engine_config(
        model_by_name_or_path("llama-3.1-8b"), gpu_by_name("h100-sxm"), max_model_len=4096, seed=3
    )
    with ServerThread(config, ServeOptions("127.0.0.1", 0, ("sim-model",), None, 0.05)) as server:
        yield server.url


async def _until(pilot: Any, condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    await wait_until(pilot, condition, timeout_s, step_s=0.2)


async def test_attached_to_a_live_replica_the_header_names_it_and_the_probe_stays_off(
    sim_url: str,
) -> None:
    app = build_app(with_url(Settings(), sim_url))
    async with app.run_test(size=(160, 50)) as pilot:
        await _until(pilot, lambda: app.views is not None and app.views.header.state == "fresh")
        assert app.views is not None
        assert "sim-model" in app.views.header.title
        assert "vLLM 0.32" in app.views.header.title
        assert "blocks" in app.views.header.cache and "N/A blocks" not in app.views.header.cache
        assert not app.views.probe.running
        await pilot.press("q")


async def test_the_gpu_pane_shows_the_simulated_gpu_unless_nvml_reads_a_real_one(
    sim_url: str,
) -> None:
    app = build_app(with_url(Settings(), sim_url), simulated=True)
    async with app.run_test(size=(160, 50)) as pilot:
        await _until(pilot, lambda: app.inputs.gpu is not None and app.inputs.poll is not None)
        await pilot.pause()
        assert app.views is not None and app.inputs.gpu is not None
        gpu = app.views.gpu
        if app.inputs.gpu.visible and app.inputs.gpu.devices:  # a GPU box: NVML wins
            assert not gpu.simulated and not any("SIMULATED" in row for row in gpu.lines)
        else:
            assert gpu.simulated
            # Idle; vLLM's 0.9 share of 79.19 GiB held; idle draw in P0 of the 700 W TDP.
            assert gpu.lines == (
                "SIMULATED GPU0 0% util  71.3 GiB/79.2 GiB  140/700 W  NVIDIA H100 80GB HBM3",
            )
            busy = app.views.litmus.items[2]
            assert busy.simulated and busy.detail.startswith("SIMULATED GPU 0% min")
        await pilot.press("q")


@pytest.mark.slow
async def test_the_probe_measures_the_replica_and_quitting_ends_its_process(sim_url: str) -> None:
    app = build_app(with_url(Settings(), sim_url), simulated=True, start_probe_at=2)
    async with app.run_test(size=(160, 50)) as pilot:

        def measured() -> bool:
            views = app.views
            return views is not None and views.slo.rows[0].client not in ("N/A", "probe off")

        def served() -> bool:  # the replica's own histogram has counted the probe's requests
            views = app.views
            return views is not None and views.slo.rows[0].server != "N/A"

        await _until(pilot, measured)
        # The server's side comes a scrape or two after the probe's first records: its window is
        # the difference of two scrapes, so under load the client's figure can show first.
        await _until(pilot, served)
        await _until(
            pilot, lambda: app.views is not None and app.views.slo.verdict is not Verdict.UNKNOWN
        )
        assert app.views is not None
        assert app.views.probe.running and "concurrency 2" in app.views.probe.level
        assert any(
            name == "slotop-probe" for name in (p.name for p in multiprocessing.active_children())
        )
        await pilot.press("q")
    assert not [p for p in multiprocessing.active_children() if p.name == "slotop-probe"]


def test_a_local_scan_waits_for_a_replica_slow_to_answer() -> None:
    from slotop.tui.run import find_local_replicas

    # /metrics like vLLM's, half a second late, as a replica busy serving may answer
    late = Misbehave("late", seconds=0.5, body=b"vllm:num_requests_running 0\n")
    with http_answers(lambda _request: late) as server:
        port = int(server.url.rsplit(":", 1)[1])
        assert find_local_replicas([port]) == [server.url]


def test_a_local_scan_finds_a_replica_by_its_metrics(sim_url: str) -> None:
    from slotop.tui.run import find_local_replicas

    port = int(sim_url.rsplit(":", 1)[1])
    with socket.socket() as sock:  # a port that answers TCP but is not vLLM
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        other = sock.getsockname()[1]
        assert find_local_replicas([other, port]) == [f"http://127.0.0.1:{port}"]
