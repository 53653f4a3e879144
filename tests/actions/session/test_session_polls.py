"""The dashboard's probe polls and failed replica polls as recording lines, and back; pooled gaps
dealt back to the requests they came from; a recording's settings read back."""

from __future__ import annotations

import dataclasses
import json

import pytest

from slotop.actions.session.lines import (
    decode_probe_records,
    header_line,
    probe_records_line,
)
from slotop.actions.session.polls import (
    decode_probe_poll,
    probe_poll_line,
    records_with_gaps,
    replica_failed_line,
)
from slotop.actions.session.reader import parse_lines
from slotop.actions.session.rebuild import recorded_settings
from slotop.collectors.probe.lag import ClientError, WindowClientErrors
from slotop.collectors.probe.records import (
    ErrorClass,
    EventKind,
    ProbeEvent,
    ProbeStatus,
    WorkerLag,
)
from slotop.config import Settings
from slotop.slo import Slo
from tests.support.fake_probe import probe_record

STATUS = ProbeStatus(
    at_s=1_800_000_010.25,
    step=2,
    mode="closed",
    target_concurrency=4,
    rate_rps=None,
    in_flight=4,
    sent_total=120,
    done_total=116,
    failed_total=1,
    streaming_sent_at_s=(1_800_000_009.5, 1_800_000_010.0),
    lag=(
        WorkerLag(
            worker=0,
            span_s=1.0,
            loop_delay_p99_s=0.0002,
            loop_delay_max_s=0.0009,
            chunk_lag_p99_s=0.0031,
            chunk_lag_max_s=0.0042,
            reads=880,
            ttft_error_s=0.0012,
            itl_error_s=None,
            client_bound=True,
        ),
    ),
)


def _through_json(line: dict[str, object]) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(json.dumps(line, allow_nan=False))
    return loaded


def test_a_probe_poll_comes_back_as_it_was_taken() -> None:
    event = ProbeEvent(1_800_000_009.0, EventKind.CONCURRENCY_SET, 2, "closed", 4)
    clients = WindowClientErrors(
        long_window=ClientError(99.0, 99.0, 0.0012, -0.0003, 0.0031, 0.0042, 880), short_window=None
    )
    line = _through_json(
        probe_poll_line(1_800_000_010.5, "read", STATUS, 7, (event,), clients, columns=True)
    )
    assert line["kind"] == "probe_poll" and line["records"] == 7
    assert line["status"][:2] == [-0.25, 2]  # at_s after the poll's time, then the step
    poll = decode_probe_poll(line, line["columns"])  # type: ignore[arg-type]
    assert poll.t_s == 1_800_000_010.5
    assert poll.state == "read"
    # every field but the send times of the requests still streaming, which no pane shows
    assert poll.status == dataclasses.replace(STATUS, streaming_sent_at_s=())
    assert poll.records == 7
    assert poll.events == (event,)
    assert poll.clients == clients


def test_a_status_row_reads_under_the_columns_it_was_written_in() -> None:
    line = _through_json(probe_poll_line(1_800_000_010.5, "held", STATUS, columns=True))
    columns = {"status": [*line["columns"]["status"], "from_a_newer_slotop"], "lag": ["worker"]}
    row = [*line["status"], 42]
    row[columns["status"].index("lag")] = [[3]]  # under one known column: the others are None
    poll = decode_probe_poll({**line, "status": row}, columns)
    assert poll.status is not None and poll.status.done_total == 116
    lag = poll.status.lag[0]
    assert lag.worker == 3 and lag.chunk_lag_p99_s is None and lag.client_bound is None


def test_a_status_before_its_columns_is_refused() -> None:
    line = _through_json(probe_poll_line(5.0, "held", STATUS))
    assert "columns" not in line
    with pytest.raises(ValueError, match="a status before any line named its columns"):
        decode_probe_poll(line, None)


def test_an_off_poll_holds_its_time_and_state_alone() -> None:
    line = probe_poll_line(5.0, "off")
    assert line == {"kind": "probe_poll", "t_s": 5.0, "state": "off"}
    poll = decode_probe_poll(line, None)
    assert (poll.status, poll.records, poll.events, poll.clients) == (None, 0, (), (None, None))


def test_a_failed_replica_poll_holds_the_reason_shown() -> None:
    line = replica_failed_line(12.5, "connection refused", 3)
    assert line == {
        "kind": "replica_failed",
        "t_s": 12.5,
        "error": "connection refused",
        "failures": 3,
    }


def test_pooled_gaps_go_back_to_the_requests_that_ended_well() -> None:
    good = [
        probe_record(0, 1, 0.1, (0.010, 0.011, 0.012)),
        probe_record(0, 2, 0.1, (0.020,)),
        probe_record(0, 3, 0.1, (0.030, 0.031)),
    ]
    failed = dataclasses.replace(probe_record(0, 4, 0.1, (0.5, 0.5)), error=ErrorClass.STREAM_CUT)
    records = [*good, failed]
    rows = decode_probe_records(_through_json(probe_records_line(10.0, records, 0.0)), 0.0)
    assert all(r.itl_s == () for r in rows.records)  # pooled: no record holds its own
    dealt = records_with_gaps(rows)
    assert [len(r.itl_s) for r in dealt] == [3, 1, 2, 0]
    every = sorted(g for r in dealt for g in r.itl_s)
    assert every == sorted(rows.itl_samples_s())
    assert len(every) == 6 and 0.5 not in every  # the failed request's gaps were never pooled
    # each pooled gap stands at its bucket's middle, within 0.5% of the gap measured
    measured = sorted(g for r in good for g in r.itl_s)
    for kept, gap in zip(every, measured, strict=True):
        assert abs(kept - gap) <= 0.005 * gap
    # dealt in turn: the longest request gets the smallest, a middle and a large one
    assert dealt[0].itl_s == (every[0], every[3], every[5])


def test_kept_gaps_are_each_requests_own() -> None:
    records = [probe_record(0, 1, 0.1, (0.010, 0.0125))]
    line = _through_json(probe_records_line(10.0, records, 0.0, keep_gaps=True))
    rows = decode_probe_records(line, 0.0)
    assert records_with_gaps(rows)[0].itl_s == (0.010, 0.0125)


def test_a_recordings_settings_come_back_and_what_is_unknown_keeps_its_default() -> None:
    settings = Settings(slo=Slo(ttft_s=0.8, itl_s=0.04), source="slotop.toml")
    header = header_line(command="demo", settings=settings, started_at_s=1.0)
    header["settings"]["slo"]["ttft_budget"] = 3  # a key from another slotop
    header["settings"]["crystal_ball"] = {"on": True}  # a section from another slotop
    read, notes = recorded_settings(parse_lines([json.dumps(header) + "\n"], "old.jsonl"))
    assert read.slo == Slo(ttft_s=0.8, itl_s=0.04)
    assert read.source == "slotop.toml"
    assert len(notes) == 2
    assert "unknown key [slo] ttft_budget" in notes[0] and notes[0].startswith("old.jsonl: ")
    assert "unknown section [crystal_ball]" in notes[1]
    assert all(note.endswith("the default is used") for note in notes)
