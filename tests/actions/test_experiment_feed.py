"""A dashboard's recording rebuilds the experiment from what its feed took, as live: the records
a sweep drained while it held the probe (its warm-up among them) land in no configuration."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from slotop.actions.experiment.recording import experiment_from_recording
from slotop.actions.session.reader import parse_lines, read_recording
from slotop.actions.session.recorder import start_recording
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeStatus
from slotop.config import Settings
from tests.support.fake_probe import probe_record

START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t_s = START

    def __call__(self) -> float:
        return self.t_s


def _status(at_s: float, concurrency: int) -> ProbeStatus:
    return ProbeStatus(at_s, 0, "closed", concurrency, None, concurrency, 0, 0, 0)


def _sent(at_s: float, request_id: int, ttft_s: float) -> object:
    record = probe_record(0, request_id, ttft_s, (0.01, 0.01))
    return dataclasses.replace(record, sent_at_s=at_s, done_at_s=at_s + ttft_s + 0.02)


def _session(path: Path) -> Path:
    """Four requests at 2 in flight the feed took; then a sweep's probe at 8 in flight, its
    five requests drained by the sweep while the feed was held; then the load off."""
    clock = Clock()
    recorder = start_recording(command="attach", settings=Settings(), path=path, clock=clock)
    recorder.probe_poll(START + 1, "off")
    started = ProbeEvent(START + 2, EventKind.STARTED, 0, "closed", 2)
    recorder.probe_events([started])
    mine = [_sent(START + 2 + i, i, 0.1) for i in range(4)]
    clock.t_s = START + 7
    recorder.probe_records(mine)  # type: ignore[arg-type]
    recorder.probe_poll(START + 7, "read", _status(START + 7, 2), 4, [started])
    swept = ProbeEvent(START + 8, EventKind.STARTED, 0, "closed", 8)
    recorder.probe_events([swept])
    theirs = [_sent(START + 8 + i * 0.1, 10 + i, 0.5) for i in range(5)]
    clock.t_s = START + 10
    recorder.probe_records(theirs)  # type: ignore[arg-type]
    recorder.probe_poll(START + 10, "held", _status(START + 10, 8))
    recorder.probe_poll(START + 12, "off")
    recorder.close()
    return path


def _points(path: Path) -> list[tuple[int, int]]:
    builder = experiment_from_recording(read_recording(path))
    assert builder.current is not None
    return [(p.concurrency, p.requests) for p in builder.curve(builder.current.index)]


def test_only_what_the_feed_took_reaches_the_curve(tmp_path: Path) -> None:
    assert _points(_session(tmp_path / "dashboard.jsonl")) == [(2, 4)]


def test_without_the_feeds_polls_every_record_counts(tmp_path: Path) -> None:
    path = _session(tmp_path / "dashboard.jsonl")
    lines = [
        line for line in path.read_text().splitlines(keepends=True) if "probe_poll" not in line
    ]
    headless = tmp_path / "headless.jsonl"
    headless.write_text("".join(lines), encoding="utf-8")
    assert parse_lines(lines).lines  # still a recording
    assert _points(headless) == [(2, 4), (8, 5)]
