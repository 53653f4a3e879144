"""Two workers' batches read as one probe: records in end order, one event per change, one status."""

from __future__ import annotations

from dataclasses import replace

from slotop.collectors.probe.merge import BatchMerger
from slotop.collectors.probe.records import (
    EventKind,
    ProbeBatch,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
    WorkerLag,
)


def record(request_id: int, step: int, sent_s: float, done_s: float) -> ProbeRecord:
    return ProbeRecord(
        request_id=request_id,
        step=step,
        sent_at_s=sent_s,
        done_at_s=done_s,
        in_flight_at_send=1,
        planned_prompt_tokens=4,
        planned_output_tokens=2,
        ttft_s=0.1,
        itl_s=(0.1,),
        e2e_s=0.2,
        chunk_count=2,
        prompt_tokens=4,
        output_tokens=2,
        finish_reason="length",
        error=None,
    )


def status(
    at_s: float, step: int, in_flight: int, streaming: tuple[float, ...] = (), bound: bool = False
) -> ProbeStatus:
    lag = WorkerLag(
        worker=0,
        span_s=1.0,
        loop_delay_p99_s=0.0001,
        loop_delay_max_s=0.0002,
        chunk_lag_p99_s=0.003 if bound else 0.0001,
        chunk_lag_max_s=0.004,
        reads=100,
        ttft_error_s=0.0002,
        itl_error_s=0.0025 if bound else 0.0003,
        client_bound=bound,
    )
    return ProbeStatus(
        at_s=at_s,
        step=step,
        mode="closed",
        target_concurrency=4,
        rate_rps=None,
        in_flight=in_flight,
        sent_total=10,
        done_total=8,
        failed_total=1,
        streaming_sent_at_s=streaming,
        lag=(lag,),
    )


def started(at_s: float, concurrency: int = 4) -> ProbeEvent:
    return ProbeEvent(at_s, EventKind.STARTED, 0, "closed", concurrency)


def stepped(at_s: float, step: int, concurrency: int) -> ProbeEvent:
    return ProbeEvent(at_s, EventKind.CONCURRENCY_SET, step, "closed", concurrency)


def test_nothing_is_out_until_every_worker_has_reported() -> None:
    merger = BatchMerger(2)
    merger.add(0, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    assert merger.status() is None
    assert merger.take() == ([], [])
    merger.add(1, ProbeBatch((), (started(1.2),), status(1.2, 0, 2)))
    records, events = merger.take()
    assert records == []
    assert [(e.kind, e.step, e.concurrency, e.at_s) for e in events] == [
        (EventKind.STARTED, 0, 4, 1.2)  # one event, stamped when the last worker applied it
    ]
    merged = merger.status()
    assert merged is not None
    assert (merged.at_s, merged.step, merged.target_concurrency, merged.in_flight) == (
        1.0,
        0,
        4,
        4,
    )
    assert (merged.sent_total, merged.done_total, merged.failed_total) == (20, 16, 2)
    assert len(merged.lag) == 2


def test_records_come_out_in_end_order_once_every_worker_is_past_them() -> None:
    merger = BatchMerger(2)
    merger.add(0, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.add(1, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.take()
    merger.add(
        0, ProbeBatch((record(0, 0, 1.0, 2.0), record(2, 0, 1.0, 2.4)), (), status(2.5, 0, 2))
    )
    assert merger.take() == ([], [])  # worker 1 may still send a record that ended before 2.4
    held = merger.status()
    assert held is not None and sorted(held.streaming_sent_at_s) == [1.0, 1.0]  # held: streaming
    merger.add(1, ProbeBatch((record(1, 0, 1.0, 2.2),), (), status(2.3, 0, 2)))
    records, _ = merger.take()
    assert [r.request_id for r in records] == [0, 1]  # 2.0, 2.2; 2.4 waits for worker 1
    merger.add(1, ProbeBatch((record(3, 0, 1.0, 2.9),), (), status(3.0, 0, 2)))
    assert [r.request_id for r in merger.take()[0]] == [2]  # 2.9 waits for worker 0
    merger.add(0, ProbeBatch((), (), status(3.0, 0, 2)))
    assert [r.request_id for r in merger.take()[0]] == [3]


def test_a_stream_open_after_its_last_token_holds_later_records_back() -> None:
    # worker 0's request had its last token at 2.1 but its stream was still open at 2.5: it will
    # end at 2.1, so worker 1's record that ended at 2.3 must wait for it (it came out first once,
    # on a loaded machine)
    merger = BatchMerger(2)
    merger.add(0, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.add(1, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.take()
    merger.add(0, ProbeBatch((), (), replace(status(2.5, 0, 1, (1.0,)), settled_at_s=2.1)))
    merger.add(1, ProbeBatch((record(1, 0, 1.0, 2.3),), (), status(2.6, 0, 1)))
    assert merger.take() == ([], [])
    settled = merger.status()
    assert settled is not None and (settled.at_s, settled.settled_at_s) == (2.5, 2.1)
    merger.add(0, ProbeBatch((record(0, 0, 1.0, 2.1),), (), status(2.7, 0, 1)))
    assert [r.request_id for r in merger.take()[0]] == [0, 1]


def test_a_step_is_one_event_and_its_records_wait_for_it() -> None:
    merger = BatchMerger(2)
    merger.add(0, ProbeBatch((), (started(1.0, 2),), status(1.0, 0, 1)))
    merger.add(1, ProbeBatch((), (started(1.0, 2),), status(1.0, 0, 1)))
    merger.take()
    early = record(4, 1, 5.0, 5.5)  # worker 0 stepped to 6 and a request of the new step ended
    merger.add(0, ProbeBatch((early,), (stepped(5.0, 1, 6),), status(6.0, 1, 3)))
    merger.add(1, ProbeBatch((), (), status(6.0, 0, 1)))  # worker 1 has not applied it yet
    assert merger.take() == ([], [])
    merged = merger.status()
    assert merged is not None and merged.step == 0 and merged.target_concurrency == 2
    merger.add(1, ProbeBatch((), (stepped(5.1, 1, 6),), status(6.1, 1, 3)))
    records, events = merger.take()
    assert [(e.kind, e.step, e.concurrency, e.at_s) for e in events] == [
        (EventKind.CONCURRENCY_SET, 1, 6, 5.1)
    ]
    assert records == [early]
    merged = merger.status()
    assert merged is not None and (merged.step, merged.target_concurrency, merged.in_flight) == (
        1,
        6,
        6,
    )


def test_a_stop_is_one_event_counting_every_worker_s_cancelled_requests() -> None:
    merger = BatchMerger(2)
    for worker in (0, 1):
        merger.add(worker, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    stop = [
        ProbeEvent(9.0, EventKind.STOPPED, 0, detail=f"{n} in-flight requests cancelled")
        for n in (2, 3)
    ]
    merger.add(0, ProbeBatch((), (stop[0],), status(9.0, 0, 0)))
    merger.worker_ended(0)
    merger.add(1, ProbeBatch((), (stop[1],), status(9.1, 0, 0)))
    merger.worker_ended(1)
    events = merger.take()[1]
    assert [(e.kind, e.detail) for e in events][-1] == (
        EventKind.STOPPED,
        "5 in-flight requests cancelled",
    )
    assert [e.kind for e in events].count(EventKind.STOPPED) == 1


def test_a_worker_that_ends_no_longer_holds_the_others_back() -> None:
    merger = BatchMerger(2)
    merger.add(0, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.add(1, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.take()
    merger.add(0, ProbeBatch((record(0, 0, 1.0, 2.0),), (), status(2.5, 0, 2)))
    merger.worker_ended(1)
    assert [r.request_id for r in merger.take()[0]] == [0]


def test_a_bound_worker_makes_one_client_bound_event_with_its_lag() -> None:
    merger = BatchMerger(2)
    merger.add(0, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.add(1, ProbeBatch((), (started(1.0),), status(1.0, 0, 2)))
    merger.take()
    merger.add(1, ProbeBatch((), (), status(2.0, 0, 2, bound=True)))
    merger.add(0, ProbeBatch((), (), status(2.0, 0, 2)))
    merger.add(1, ProbeBatch((), (), status(3.0, 0, 2, bound=True)))
    events = merger.take()[1]
    assert [e.kind for e in events] == [EventKind.CLIENT_BOUND]
    assert events[0].lag_s == 0.0025  # what the bound worker's lag added to its p99 ITL
    merged = merger.status()
    assert merged is not None and merged.client_bound
    for at_s in (4.0, 6.0, 8.5):  # caught up only after five seconds with no worker bound
        merger.add(0, ProbeBatch((), (), status(at_s, 0, 2)))
        merger.add(1, ProbeBatch((), (), status(at_s, 0, 2)))
    assert [e.kind for e in merger.take()[1]] == [EventKind.CLIENT_CAUGHT_UP]
