"""A recorded session replays to the live numbers: the same Snapshot, built by the same code.

A real monitor polls the simulated replica while the probe loads it and a recorder writes every
poll; the rebuild then pushes the recorded readings through a monitor of the recorded shape. The
last rebuilt Snapshot, and its JSON, must equal the live monitor's last one exactly.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotop.actions.session import read_recording, snapshot_at, snapshots
from slotop.actions.session.rebuild import SnapshotReplay
from slotop.actions.session.recorder import start_recording
from slotop.actions.session.taps import record_monitor
from slotop.actions.wiring.replica import probe_control, replica_client, replica_monitor, with_url
from slotop.cli import main
from slotop.collectors.report import snapshot_to_json
from slotop.config import Settings, with_overrides
from tests.support.sim_replica import run_sim

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    yield from run_sim()


def test_replayed_snapshots_equal_the_live_ones(sim_url: str, tmp_path: Path) -> None:
    settings = with_overrides(
        with_url(Settings(), sim_url),
        {"window.long_s": 4.0, "window.short_s": 2.0, "replica.scrape_interval_s": 0.25},
    )
    path = tmp_path / "live.jsonl"
    recorder = start_recording(command="attach", settings=settings, path=path)
    assert recorder.failure is None
    live = []
    control = probe_control(settings, recorder=recorder)
    with replica_client(settings) as client:
        monitor = record_monitor(replica_monitor(settings, client), recorder)
        control.apply(control.plan_start(concurrency=4))
        try:
            for _ in range(24):  # longer than the long window, so the ring has wrapped
                live.append(monitor.poll())
                assert control.probe is not None
                control.probe.drain_records()
                time.sleep(0.25)
        finally:
            control.apply(control.plan_stop())
    recorder.close()

    recording = read_recording(path)
    assert recording.ended and not recording.notes
    rebuilt = list(snapshots(recording))
    assert len(rebuilt) == len(live)
    assert rebuilt[-1] == live[-1]
    assert snapshot_to_json(rebuilt[-1], source="live") == snapshot_to_json(live[-1], source="live")
    assert rebuilt == live
    assert live[-1].window.generation_tokens_per_s  # the probe's load is in what was compared
    assert snapshot_at(recording, live[5].taken_at_s) == live[5]
    assert snapshot_at(recording, live[0].taken_at_s - 1.0) is None
    replay = SnapshotReplay(recording)
    for _ in replay.polls():
        pass
    assert replay.view(2.0) == monitor.window.view(2.0)
    records = [record for rows in recording.probe_rows() for record in rows.records]
    assert records and all(record.ok for record in records if record.error is None)
    assert [event.kind.value for event in recording.probe_events()][:1] == ["started"]


def test_a_recording_changes_nothing_live(sim_url: str, tmp_path: Path) -> None:
    """A monitor that records builds the very snapshots one that does not would."""
    settings = with_url(Settings(), sim_url)
    recorder = start_recording(command="attach", settings=settings, path=tmp_path / "r.jsonl")
    with replica_client(settings) as client:
        plain = replica_monitor(settings, client)
        recorded = record_monitor(replica_monitor(settings, client), recorder)
        first = plain.poll(), recorded.poll()
    recorder.close()
    same = dataclasses.replace(first[1], taken_at_s=first[0].taken_at_s)
    assert same.kv == first[0].kv and same.replica == first[0].replica


def test_a_session_in_parts_replays_as_the_live_one(sim_url: str, tmp_path: Path) -> None:
    """Past its size, a recording goes on in parts; read from any of them, the session rebuilds
    to the live snapshots, and `slotop report` writes the whole session from a later part."""
    settings = with_overrides(
        with_url(Settings(), sim_url),
        {
            "window.long_s": 4.0,
            "window.short_s": 2.0,
            "replica.scrape_interval_s": 0.25,
            "session.max_file_mb": 0.02,
        },
    )
    path = tmp_path / "parts.jsonl"
    recorder = start_recording(command="attach", settings=settings, path=path)
    live = []
    control = probe_control(settings, recorder=recorder)
    with replica_client(settings) as client:
        monitor = record_monitor(replica_monitor(settings, client), recorder)
        control.apply(control.plan_start(concurrency=4))
        try:
            # Until the recording has three parts: how fast it grows is how fast the replica
            # and the probe run on this machine, so it is waited for, not timed.
            for _ in range(240):
                live.append(monitor.poll())
                assert control.probe is not None
                control.probe.drain_records()
                if len(live) >= 8 and len(recorder.parts) >= 3:
                    break
                time.sleep(0.25)
        finally:
            control.apply(control.plan_stop())
    recorder.close()
    assert len(recorder.parts) >= 3
    recording = read_recording(recorder.parts[-1])
    assert recording.parts == tuple(str(part) for part in recorder.parts)
    assert recording.ended and list(snapshots(recording)) == live
    report = tmp_path / "report"
    assert main(["report", str(recorder.parts[1]), "--out", str(report)]) == 0
    assert (report / "report.md").is_file()
