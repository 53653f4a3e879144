"""Following a window past its end: it waits for exactly the requests sent before the end."""

from __future__ import annotations

from slotop.collectors.probe.follow import follow_window, streaming_sent_by
from slotop.collectors.probe.records import ProbeRecord, ProbeStatus
from tests.support.fake_probe import ScriptedProbe


def request(request_id: int, sent_s: float, done_s: float) -> ProbeRecord:
    return ProbeRecord(
        request_id=request_id,
        step=0,
        sent_at_s=sent_s,
        done_at_s=done_s,
        in_flight_at_send=1,
        planned_prompt_tokens=8,
        planned_output_tokens=4,
        ttft_s=0.5,
        itl_s=(0.1,) * 3,
        e2e_s=done_s - sent_s,
        chunk_count=4,
        prompt_tokens=8,
        output_tokens=4,
        finish_reason="length",
        error=None,
    )


# The window ends at 10 s. One request ended inside it, one sent inside it ends 3 s later, and one
# sent 1 s after the end lasts to 20 s: the wait is for the second alone.
REQUESTS = [request(1, 0.0, 5.0), request(2, 4.0, 13.0), request(3, 11.0, 20.0)]


def test_the_wait_ends_when_no_request_sent_before_the_end_streams() -> None:
    probe = ScriptedProbe(REQUESTS, now_s=10.0)
    followed = follow_window(probe, 10.0, 10.0, clock=probe.clock, wait=probe.tick)
    assert followed.followed_s == 3.0
    assert followed.requests_cut == 0
    assert [r.request_id for r in followed.records] == [1, 2]


def test_a_wait_that_runs_out_says_how_many_it_cut() -> None:
    probe = ScriptedProbe(REQUESTS, now_s=10.0)
    followed = follow_window(probe, 10.0, 2.0, clock=probe.clock, wait=probe.tick)
    assert (followed.followed_s, followed.requests_cut) == (2.0, 1)
    assert [r.request_id for r in followed.records] == [1]


def test_without_a_status_the_wait_lasts_its_bound_and_the_cut_is_unknown() -> None:
    probe = ScriptedProbe(REQUESTS, now_s=10.0, silent=True)
    followed = follow_window(probe, 10.0, 4.0, clock=probe.clock, wait=probe.tick)
    assert (followed.followed_s, followed.requests_cut) == (4.0, None)
    assert [r.request_id for r in followed.records] == [1, 2]


def test_a_status_from_before_the_end_says_nothing_about_it() -> None:
    status = ProbeStatus(9.9, 0, "closed", 1, None, 0, 5, 5, 0, ())
    assert streaming_sent_by(status, 10.0) is None
    later = ProbeStatus(10.1, 0, "closed", 3, None, 3, 8, 5, 0, (3.0, 9.5, 10.05))
    assert streaming_sent_by(later, 10.0) == 2
