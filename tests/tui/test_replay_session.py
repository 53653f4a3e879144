"""A whole session on the simulated replica, then its recording: replayed, reported, the same.

The dashboard runs as `slotop demo` runs it (the real app, feed, spawned probe and recorder, the
simulated replica started and restarted by slotop): two concurrency steps, a KV-dtype restart
auto → fp8 through k, two more steps. Then the session has two configurations with curves of
their own and a before/after table; `slotop replay` shows the same views as the live panes
after the same lines of the recording; and `slotop report` writes its Markdown, PNGs and CSV.
"""

from __future__ import annotations

import csv
import tempfile
from pathlib import Path

import pytest

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, demo_launch_spec
from slotop.actions.session.reader import read_recording
from slotop.actions.session.rebuild import recorded_settings
from slotop.actions.session.recorder import start_recording
from slotop.cli import main
from slotop.config import settings_from_mapping
from slotop.tui.replay_app import ReplayApp
from slotop.tui.restarting import RestartAccess
from slotop.tui.run import build_app
from tests.support.replay_session import Watcher, replayed_views, view_differences
from tests.support.vllm_replica import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

SIM_ARGS = ("--model", "qwen2.5-0.5b", "--gpu", "l4", "--max-model-len", "2048")


def _settings(url: str) -> object:
    return settings_from_mapping(
        {
            "replica": {"url": url},
            "load": {"prompt_tokens": 256, "output_tokens": 24},
            "restart": {"min_requests": 6},
            "window": {"long_s": 30.0, "short_s": 10.0},
            "session": {"itl_gaps": True},  # every gap kept: the replay's numbers equal live ones
        },
        "the replay test",
    )


def _concurrencies(curve: object) -> list[int]:
    return [point.concurrency for point in getattr(curve, "points", ())]


async def test_a_sim_session_replays_and_reports_as_it_was_seen(
    tmp_path: Path, no_strays: None
) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    spec, dials = demo_launch_spec(url, SIM_ARGS, Path(tempfile.mkdtemp(dir=tmp_path)))
    replica = ManagedReplica(spec)
    replica.start(dials)
    settings = _settings(url)
    path = tmp_path / "session.jsonl"
    recorder = start_recording(command="demo", settings=settings, path=path)  # type: ignore[arg-type]
    access = RestartAccess(replica, spec, "managed")
    app = build_app(
        settings,  # type: ignore[arg-type]
        simulated=True,
        start_probe_at=2,
        restart_access=lambda: access,
        recorder=recorder,
    )

    def points_at(concurrency: int) -> bool:
        return concurrency in [p.concurrency for p in app.inputs.curve]

    try:
        async with app.run_test(size=(160, 60)) as pilot:
            watch = Watcher(app, recorder, pilot)
            await watch.until(
                lambda: (
                    points_at(2)
                    and app.inputs.configuration is not None
                    and bool(app.inputs.configuration.dials)
                ),
                "a point at 2 and the dials",
            )
            await pilot.press("plus")
            await watch.until(lambda: points_at(3), "a point at 3")
            await watch.sample()
            await pilot.press("k")
            await pilot.press("down", "down", "down", "enter")  # auto, bfloat16, float16, fp8
            await pilot.press("y")
            await watch.until(
                lambda: (
                    app.inputs.configuration is not None and app.inputs.configuration.index == 2
                ),
                "the second configuration",
            )
            await watch.until(
                lambda: (
                    app.inputs.before_after is not None
                    and app.inputs.before_after.table is not None
                ),
                "the before/after table",
            )
            await pilot.press("plus")
            await watch.until(lambda: points_at(4), "a point at 4")
            await pilot.press("plus")
            await watch.until(lambda: points_at(5), "a point at 5")
            for _ in range(3):
                await watch.sample()
            live_current, live_previous = app.inputs.configuration, app.inputs.previous_curve
            live_table = app.inputs.before_after
            restarted_with = replica.dials
            await pilot.press("q")
    finally:
        replica.stop()
        recorder.close()

    # two configurations, each with a curve of its own
    assert restarted_with == Dials("fp8", dials.max_num_seqs, dials.max_num_batched_tokens)
    assert live_current is not None and live_current.label.startswith("#2 kv fp8")
    assert live_previous is not None and live_previous.configuration.label.startswith("#1 kv auto")
    assert _concurrencies(live_previous) == [2, 3]
    assert {4, 5} <= {p.concurrency for p in app.inputs.curve}
    assert 2 not in {p.concurrency for p in app.inputs.curve}

    # a before/after table at the load the restart paused, in the recording as shown
    assert live_table is not None and live_table.table is not None
    assert live_table.load == "3 in flight"
    labels = [row.cells[0] for row in live_table.table.rows]
    assert any(label.startswith("TTFT") for label in labels)
    assert any(label.startswith("KV") for label in labels)
    recording = read_recording(path)
    panels = [
        line.data["state"]
        for line in recording.of_kind("action")
        if line.data["action"] == "before_after"
    ]
    assert panels[0] == "measuring" and "measured" in panels

    # the replay shows what the live panes showed after the same lines
    assert len(watch.seen) >= 10, f"only {len(watch.seen)} of {watch.tries} samples were quiet"
    replay_settings, notes = recorded_settings(recording)
    assert notes == ()
    replay = ReplayApp(recording, replay_settings)
    replay.transport.pause()
    async with replay.run_test(size=(160, 60)) as pilot:
        feed = replay.replay_feed
        assert feed is not None
        feed.seek(replay.transport.end_s)
        while not replay.frames.done:
            await pilot.pause(0.05)
        found: list[str] = []
        for seen in watch.seen:
            views, change = await replayed_views(replay, pilot, seen.lines)
            found += [
                f"after line {seen.lines}: {d}" for d in view_differences(seen, views, change)
            ]
        assert not found, "\n".join(found[:20])
        header = replay.views.header if replay.views is not None else None
        assert header is not None and header.freshness.startswith("REPLAY paused")
        assert "recorded " in header.cache and str(path) in header.cache
        await pilot.press("q")

    # and the report
    out = tmp_path / "report"
    assert main(["report", str(path), "--out", str(out)]) == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "kv fp8" in report and "kv auto" in report
    for png in ("timeline.png", "curve-1.png", "curve-2.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    with (out / "steps.csv").open(encoding="utf-8") as stream:
        rows = list(csv.DictReader(stream))
    columns = set(rows[0])
    configuration = next(c for c in columns if c.startswith("configuration"))
    concurrency = next(c for c in columns if c.startswith("concurrency"))
    steps = {(row[configuration], int(row[concurrency])) for row in rows}
    assert {c for _, c in steps} >= {2, 3, 4, 5}
    assert len({name for name, _ in steps}) == 2
