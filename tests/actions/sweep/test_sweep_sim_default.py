"""The sweep `slotop demo` runs with its defaults stops where the SLO bends, not on the queue.

Each step's load (the default probe: 512-token prompts, 128 tokens out, `c` clients) runs through
the demo's simulated replica (Llama-3.1-8B on an H100, every other dial at its default) in
simulated time, and is summarised by the sweep's own `measure_step` and judged by its own
`next_stop`, as a live sweep would be, with the waiting gauge read as often as the monitor reads it.
"""

from __future__ import annotations

from slotop.actions.sweep.decide import StopReason, next_stop, plan_steps
from slotop.actions.sweep.model import StepResult
from slotop.actions.sweep.plan import spec_from_settings
from slotop.actions.sweep.step import measure_step
from slotop.collectors.probe.records import ProbeRecord
from slotop.config import Settings
from slotop.sim.apiserver import api_server_timing
from slotop.sim.defaults import resolve_engine_config
from slotop.sim.tables import GPUS, MODELS
from slotop.sim.virtual import VirtualRequest, VirtualRun, run_closed_loop

SETTINGS = Settings()
REQUESTS_PER_CLIENT = 12


def _records(run: VirtualRun, concurrency: int) -> list[ProbeRecord]:
    """The run's requests as the probe records them, in the order they were sent."""
    ordered = sorted(run.records, key=lambda r: r.sent_s)
    return [
        ProbeRecord(
            request_id=index,
            step=concurrency,
            sent_at_s=record.sent_s,
            done_at_s=record.token_s[-1],
            in_flight_at_send=concurrency,
            planned_prompt_tokens=record.finished.prompt_tokens,
            planned_output_tokens=record.finished.max_tokens,
            ttft_s=record.ttft_s,
            itl_s=record.gaps_s,
            e2e_s=record.token_s[-1] - record.sent_s,
            chunk_count=len(record.token_s),
            prompt_tokens=record.finished.prompt_tokens,
            output_tokens=record.finished.output_tokens,
            finish_reason=record.finished.finish_reason,
            error=None,
        )
        for index, record in enumerate(ordered)
    ]


def _step(concurrency: int) -> StepResult:
    """One sweep step on the demo's replica: its dwell begins once each client has sent twice."""
    load = SETTINGS.load
    config = resolve_engine_config(MODELS["llama-3.1-8b"], GPUS["h100-sxm"])
    run = run_closed_loop(
        config,
        api_server_timing(config.host),
        lambda _: VirtualRequest(load.prompt_tokens, load.output_tokens, "completion", False),
        concurrency,
        concurrency * REQUESTS_PER_CLIENT,
    )
    records = _records(run, concurrency)
    start_s = records[2 * concurrency].sent_at_s
    end_s = max(r.done_at_s for r in records)
    interval_s = SETTINGS.replica.scrape_interval_s
    waiting: list[float] = []
    published = [entry for entry in run.published if entry[0] >= start_s]
    at_s = start_s
    while at_s <= end_s:  # each scrape reads the gauges last published before it
        before = [stats for when, stats in published if when <= at_s]
        waiting.append(float(before[-1].num_waiting) if before else 0.0)
        at_s += interval_s
    spec = spec_from_settings(SETTINGS)
    return measure_step(concurrency, records, start_s, end_s, spec, gauges_waiting=waiting)


def test_the_demo_s_default_sweep_stops_where_the_slo_bends_not_on_the_queue() -> None:
    spec = spec_from_settings(SETTINGS)
    plan = plan_steps(SETTINGS.load.max_concurrency)
    steps: list[StepResult] = []
    stop = None
    for concurrency in plan:
        steps.append(_step(concurrency))
        stop = next_stop(steps, plan, spec.slo, spec.rules)
        if stop is not None:
            break
    assert stop is StopReason.SLO_BROKEN, [(s.concurrency, s.server.waiting_mean) for s in steps]
    last, below = steps[-1], steps[-2]
    # Below the stop the queue stayed under the rule's threshold, and the step below held the
    # SLO while the last broke it: p99 bent between them. (At the stop a burst of prompts may
    # outrun the token budget and really wait: the SLO, the more serious flag, names the stop.)
    assert all(
        s.server.waiting_mean is not None
        and s.server.waiting_mean < spec.rules.queue_waiting_requests
        for s in steps[:-1]
    )
    assert below.client.ttft_slo_s is not None and below.client.ttft_slo_s <= spec.slo.ttft_s
    assert below.client.itl_slo_s is not None and below.client.itl_slo_s <= spec.slo.itl_s
    broke_ttft = last.client.ttft_slo_s is not None and last.client.ttft_slo_s > spec.slo.ttft_s
    broke_itl = last.client.itl_slo_s is not None and last.client.itl_slo_s > spec.slo.itl_s
    assert broke_ttft or broke_itl
