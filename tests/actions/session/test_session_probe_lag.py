"""The probe's client-bound events in a session: recorded with their lag, read back, older lines
without it still read, and the timeline's load line left alone by them."""

from __future__ import annotations

from pathlib import Path

from slotop.actions.report.timeline import replica_series, timeline_figure
from slotop.actions.session.lines import decode_probe_event, probe_event_line
from slotop.actions.session.reader import read_recording
from slotop.actions.session.recorder import start_recording
from slotop.collectors.probe.records import EventKind, ProbeEvent
from slotop.config import Settings

BOUND = ProbeEvent(
    105.0,
    EventKind.CLIENT_BOUND,
    1,
    detail="the probe is client-bound, its numbers bent: ITL p99 error 2.50 ms (1 worker)",
    lag_s=0.0025,
)


def test_a_client_bound_event_keeps_its_lag_through_a_line() -> None:
    line = probe_event_line(BOUND)
    assert line["event"] == "client_bound" and line["lag_s"] == 0.0025
    assert decode_probe_event(line) == BOUND


def test_a_load_event_has_no_lag_key_and_an_older_line_reads_as_before() -> None:
    started = ProbeEvent(100.0, EventKind.STARTED, 0, "closed", 4)
    line = probe_event_line(started)
    assert "lag_s" not in line
    older = {  # a probe_event line as slotop wrote it before the probe measured its lag
        "kind": "probe_event",
        "t_s": 100.0,
        "event": "concurrency_set",
        "step": 1,
        "mode": "closed",
        "concurrency": 8,
        "rate_rps": None,
        "burstiness": None,
        "detail": "",
    }
    assert decode_probe_event(older) == ProbeEvent(100.0, EventKind.CONCURRENCY_SET, 1, "closed", 8)


def test_the_load_line_of_the_timeline_skips_how_the_probe_kept_up(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    recorder = start_recording(
        command="attach", settings=Settings(), path=path, clock=iter(range(100, 200)).__next__
    )
    recorder.probe_events(
        [
            ProbeEvent(101.0, EventKind.STARTED, 0, "closed", 4),
            BOUND,
            ProbeEvent(108.0, EventKind.CLIENT_CAUGHT_UP, 1, lag_s=0.0002),
            ProbeEvent(110.0, EventKind.STOPPED, 1),
        ]
    )
    recorder.close()
    recording = read_recording(path)
    assert [e.lag_s for e in recording.probe_events()] == [None, 0.0025, 0.0002, None]
    figure = timeline_figure(
        recording, replica_series(recording), ttft_target_s=None, itl_target_s=None
    )
    load = next(s for p in figure.panels for s in p.right if s.label == "probe concurrency")
    start = recording.header.started_at_s
    assert load.y[1:-1] == (4.0, 0.0)  # started at 4, stopped: no gap for the lag events
    assert load.x[1:-1] == (101.0 - start, 110.0 - start)
