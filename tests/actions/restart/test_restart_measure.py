"""A before/after side counts as a sweep step does: requests sent in the dwell, tokens inside it.

The replica does not answer (its side has no snapshot), so only the probe's records count; the
clock is a fake one that the side's sleeps move. The dwell runs from 100 s to 110 s:
  R1 sent at 95 (before): chunks at 96..105, one token each; 101..105 inside: 5 tokens.
  R2 sent at 104 (inside): chunks at 105..114; 105..110 inside: 6 tokens; followed to 114.
  R3 sent at 111 (after): none.
So 11 tokens in 10 s (1.1 tok/s), and the latencies are R2's alone (TTFT 1 s).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.compare import RunSide, compare_runs
from slotop.actions.restart.measure import measure_side
from slotop.collectors.oneshot import snapshot_of_dump
from slotop.collectors.probe.records import ProbeRecord
from slotop.config import ReplicaSettings, Settings
from tests.support.fake_probe import ScriptedProbe
from tests.support.paths import CAPTURES
from tests.support.vllm_replica import free_port


def request(request_id: int, sent_s: float) -> ProbeRecord:
    return ProbeRecord(
        request_id=request_id,
        step=0,
        sent_at_s=sent_s,
        done_at_s=sent_s + 10.0,
        in_flight_at_send=1,
        planned_prompt_tokens=8,
        planned_output_tokens=10,
        ttft_s=1.0,
        itl_s=(1.0,) * 9,
        e2e_s=10.0,
        chunk_count=10,
        prompt_tokens=8,
        output_tokens=10,
        finish_reason="length",
        error=None,
    )


SETTINGS = Settings(replica=ReplicaSettings(url=f"http://127.0.0.1:{free_port()}", timeout_s=1.0))


def side(max_follow_s: float | None = None) -> RunSide:
    probe = ScriptedProbe([request(1, 95.0), request(2, 104.0), request(3, 111.0)], now_s=100.0)
    return measure_side(
        "as it ran",
        Dials(),
        probe,
        SETTINGS,
        dwell_s=10.0,
        load_began_s=90.0,
        max_follow_s=max_follow_s,
        wall_clock=probe.clock,
        sleep=probe.sleep,
    )


def test_a_side_counts_the_tokens_of_its_dwell_and_follows_its_requests() -> None:
    measured = side()
    stats = measured.stats
    assert stats is not None and measured.snapshot is None
    assert (stats.start_s, stats.end_s) == (100.0, 110.0)
    assert stats.output_tokens_per_s == pytest.approx(1.1)
    assert stats.requests_ok == 1
    assert stats.ttft.at(50.0) == pytest.approx(1.0)
    assert stats.requests_cut == 0
    # Its one request lives 10 s: batches of two lifetimes are 20 s, longer than the side, so it
    # has no batches to estimate its noise from (a longer dwell would).
    spread = measured.spread
    assert spread is not None and spread.batches is None
    assert spread.output_tokens_per_s is None and spread.latency("ttft", 50.0) is None
    # nothing opened a stream: the load had settled when it began, 10 s before the side
    assert measured.span is not None and measured.span.since_load_s == pytest.approx(10.0)
    assert measured.span.words() == "1 request over 10.0 s, 10.0 s into its load"


def test_a_side_whose_wait_runs_out_says_what_it_cut() -> None:
    measured = side(max_follow_s=1.0)
    stats = measured.stats
    assert stats is not None
    assert stats.requests_cut == 1
    assert stats.requests_ok == 0
    assert stats.output_tokens_per_s == pytest.approx(0.5)  # R1's 5 tokens; R2 never reported
    notes = compare_runs(measured, side()).notes
    assert any("as it ran: 1 requests still streamed when the wait" in n for n in notes)


def with_replica_rate(run: RunSide, label: str, tokens_per_s: float) -> RunSide:
    """The side with a snapshot whose generation-token counter rose at `tokens_per_s`."""
    text = (CAPTURES / "vllm-0.32-cpu-load.txt").read_text(encoding="utf-8")
    snapshot = snapshot_of_dump(text, where="capture", taken_at_s=0.0)
    window = replace(snapshot.window, generation_tokens_per_s=tokens_per_s)
    return replace(run, label=label, snapshot=replace(snapshot, window=window))


def test_a_side_whose_token_rate_disagrees_with_the_replicas_says_so() -> None:
    measured = side()  # the probe saw 1.1 tok/s
    agrees = with_replica_rate(measured, "as it ran", 1.05)  # +5%: they agree
    disagrees = with_replica_rate(measured, "restarted", 1.3)  # 1.1 / 1.3 − 1: −15%
    notes = compare_runs(agrees, disagrees).notes
    assert [n for n in notes if "tok/s" in n] == [
        "restarted: the probe's 1.1 tok/s and the replica's 1.3 tok/s differ by -15% (more than "
        "10%): other clients share the replica, or its counters missed the span"
    ]
