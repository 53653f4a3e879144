"""How fast `slotop replay` reads, builds and seeks an hour-long dashboard recording.

Records a loaded session as the dashboard's feed records it (the real Feed, probe, GPU reader
and recorder on the simulated replica) for `--seconds`, or takes `--recording FILE`; prints what
it costs per hour by line kind; tiles it to `--hours` (each copy's times moved on by the span
before it: the replica's counters start over at each copy, as after a restart), then times:

- reading the file (`read_recording`);
- building every frame once, which is what the first jump to the end costs (frames are kept);
- a jump back once built: the messages a reset posts, the latency trend with them;
- for comparison, rebuilding from the start to the middle: what every jump back would cost if
  the frames were not kept.

Medians of `--repeat` runs; the growth of the process's peak memory while the frames are built.

    .venv/bin/python -m bench.bench_replay
    .venv/bin/python -m bench.bench_replay --seconds 120 --concurrency 16 --hours 1
    .venv/bin/python -m bench.bench_replay --recording ~/.local/state/slotop/sessions/X.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import resource
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slotop.actions.session.reader import read_recording
from slotop.actions.session.rebuild import recorded_settings
from slotop.actions.session.recorder import start_recording
from slotop.actions.session.taps import RecordingGpu, record_monitor
from slotop.actions.wiring.replica import probe_control, replica_monitor, with_url
from slotop.collectors.gpu.reader import GpuReader
from slotop.config import Settings, with_overrides
from slotop.tui.feed import Feed
from slotop.tui.replay.feed import messages_at
from slotop.tui.replay.frames import ReplayFrames
from tests.support.sim_replica import run_sim


def _median_s(work: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def record(settings: Settings, path: Path, seconds: float, concurrency: int) -> None:
    """A loaded session recorded by the dashboard's own feed (no screen)."""
    recorder = start_recording(command="attach", settings=settings, path=path)
    control = probe_control(settings, recorder=recorder)
    slo = settings.slo
    feed = Feed(
        record_monitor(replica_monitor(settings), recorder),
        lambda _: None,
        gpu=RecordingGpu(GpuReader(), recorder),
        probe=control,
        long_window_s=settings.window.long_s,
        short_window_s=settings.window.short_s,
        slo_percentiles=(slo.ttft_percentile, slo.itl_percentile),
        goodput_targets=slo.goodput_targets,
        recorder=recorder,
    )
    feed.start()
    try:
        control.apply(control.plan_start(concurrency=concurrency))
        time.sleep(seconds)
    finally:
        feed.stop()
        recorder.close()


def size_per_hour(path: Path) -> None:
    """Bytes per hour by line kind, against the 10 MB/h budget."""
    sizes: Counter[str] = Counter()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    times = [json.loads(line).get("t_s") for line in lines[1:]]
    span_s = max(t for t in times if t is not None) - json.loads(lines[0])["started_at_s"]
    for number, line in enumerate(lines):
        sizes["header" if number == 0 else json.loads(line)["kind"]] += len(line.encode())
    total = sum(sizes.values())
    print(f"recording: {span_s:.0f} s, {total:,} bytes, {total / span_s * 3600 / 1e6:.2f} MB/h")
    for kind, size in sizes.most_common():
        print(f"  {kind:<16} {size / span_s * 3600 / 1e6:6.2f} MB/h")


def _moved(data: dict[str, Any], by_s: float) -> dict[str, Any]:
    """One line's times moved on by `by_s` (probe rows count from the start: moved too)."""
    out = dict(data)
    out["t_s"] = data["t_s"] + by_s
    kind = data["kind"]
    if kind == "reading":
        out["mono_s"] = data["mono_s"] + by_s
    elif kind == "probe_records":
        out["rows"] = [[*row[:2], row[2] + by_s, row[3] + by_s, *row[4:]] for row in data["rows"]]
    elif kind == "probe_poll":  # its status's times count from its own t_s
        out["events"] = [{**e, "t_s": e["t_s"] + by_s} for e in data.get("events", ())]
    elif kind == "action" and data.get("since_s") is not None:
        out["since_s"] = data["since_s"] + by_s
    return out


def tile(source: Path, target: Path, hours: float) -> int:
    """Copy `source`'s lines after its header until `hours` are covered; how many copies."""
    lines = source.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    body = [json.loads(line) for line in lines[1:]]
    body = [d for d in body if d["kind"] != "end"]
    started = header["started_at_s"]
    span_s = body[-1]["t_s"] - started + 1.0
    copies = max(1, round(hours * 3600 / span_s))
    with target.open("w", encoding="utf-8") as out:
        out.write(lines[0] + "\n")
        for copy in range(copies):
            for data in body:
                if copy and data["kind"] == "monitor":
                    continue
                out.write(json.dumps(_moved(data, copy * span_s)) + "\n")
    return copies


def measure(path: Path, repeat: int) -> None:
    """Time reading, building, jumping back, and rebuilding to the middle."""
    read_s = _median_s(lambda: read_recording(path), repeat)
    recording = read_recording(path)
    settings, _ = recorded_settings(recording)
    polls = sum(1 for line in recording.lines if line.kind == "reading")
    span_s = recording.last_t_s - recording.header.started_at_s
    print(f"replayed: {span_s / 3600:.2f} h, {len(recording.lines):,} lines, {polls:,} polls")
    print(f"  read the file          {read_s:8.2f} s")

    def build() -> ReplayFrames:
        frames = ReplayFrames(recording, settings)
        frames.build(len(recording.lines))
        return frames

    before_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    frames = build()
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_kb) / 1024
    build_s = _median_s(build, repeat)
    print(
        f"  build every frame      {build_s:8.2f} s  ({build_s / polls * 1e3:.2f} ms a poll; "
        f"{len(frames.frames):,} frames, peak memory +{grown_mb:.0f} MB)"
    )
    picks = random.Random(7).sample(range(1, len(frames.frames)), min(50, len(frames.frames) - 1))
    jumps = []
    for count in picks:
        started = time.perf_counter()
        messages_at(frames, count)
        jumps.append(time.perf_counter() - started)
    print(
        f"  jump back, frames kept {statistics.median(jumps) * 1e3:8.2f} ms median, "
        f"{max(jumps) * 1e3:.2f} ms at most ({len(picks)} jumps)"
    )
    middle = recording.header.started_at_s + span_s / 2

    def rebuild_to_middle() -> None:
        again = ReplayFrames(recording, settings)
        again.build_until(middle)

    rebuild_s = _median_s(rebuild_to_middle, repeat)
    print(f"  rebuild to the middle  {rebuild_s:8.2f} s  (each jump back, were frames not kept)")


def main() -> int:
    """Record (or take) a dashboard recording, tile it to an hour, and time its replay."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recording", type=Path, help="a dashboard recording to start from")
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to record")
    parser.add_argument("--concurrency", type=int, default=16, help="probe requests in flight")
    parser.add_argument("--model", default="llama-3.1-8b", help="simulated model")
    parser.add_argument("--hours", type=float, default=1.0, help="tile the recording to this")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="slotop-bench-replay-") as scratch:
        source = args.recording
        if source is None:
            source = Path(scratch) / "session.jsonl"
            with contextlib.contextmanager(run_sim)(model=args.model) as url:
                settings = with_overrides(with_url(Settings(), url), {"load.output_tokens": 128})
                print(
                    f"sim ({args.model}), probe concurrency {args.concurrency}, "
                    f"{args.seconds:g} s through the dashboard's feed"
                )
                record(settings, source, args.seconds, args.concurrency)
        size_per_hour(source)
        tiled = Path(scratch) / "tiled.jsonl"
        copies = tile(source, tiled, args.hours)
        print(f"tiled {copies}× to {tiled.stat().st_size / 1e6:.1f} MB")
        measure(tiled, args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
