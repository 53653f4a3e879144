"""How long `slotop report` takes: reading a recording, replaying it, building the report, drawing.

Records a loaded session as the dashboard does (`bench.bench_session`'s recorder loop) for
`--seconds`, or takes `--recording FILE`, then times each stage of the report (median of
`--repeat` runs) and prints the cost per recorded poll and per request, and what an hour-long
session at the same rate would take.

    .venv/bin/python -m bench.bench_report
    .venv/bin/python -m bench.bench_report --seconds 120 --concurrency 16
    .venv/bin/python -m bench.bench_report --recording ~/.local/state/slotop/sessions/X.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench.bench_session import _record as record_session
from slotop.actions.experiment import experiment_from_recording
from slotop.actions.plots import png_bytes
from slotop.actions.report.build import build_report
from slotop.actions.report.timeline import replica_series
from slotop.actions.report.write import write_report
from slotop.actions.session.reader import read_recording
from slotop.actions.wiring.replica import with_url
from slotop.config import Settings, with_overrides
from tests.support.sim_replica import run_sim


def _median_s(work: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


@contextlib.contextmanager
def _recording(args: argparse.Namespace, scratch: Path) -> Iterator[Path]:
    if args.recording is not None:
        yield args.recording
        return
    with contextlib.contextmanager(run_sim)(model=args.model) as url:
        settings = with_overrides(
            with_url(Settings(), url), {"load.output_tokens": args.output_tokens}
        )
        path = scratch / "session.jsonl"
        record_session(settings, path, args.seconds, args.concurrency)
        yield path


def main() -> int:
    """Time each stage of one session's report."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--recording", type=Path, help="a recording to report (else record one)")
    parser.add_argument("--model", default="llama-3.1-8b", help="simulated model")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to record")
    parser.add_argument("--concurrency", type=int, default=16, help="probe requests in flight")
    parser.add_argument("--output-tokens", type=int, default=128, help="tokens per request")
    parser.add_argument("--repeat", type=int, default=3, help="runs per stage (median)")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="slotop-bench-report-") as scratch,
        _recording(args, Path(scratch)) as path,
    ):
        recording = read_recording(path)
        polls = sum(1 for _ in recording.of_kind("reading"))
        requests = sum(len(rows.records) for rows in recording.probe_rows())
        span_s = recording.last_t_s - recording.header.started_at_s
        report = build_report(recording, str(path))
        stages: list[tuple[str, float]] = [
            ("read the recording", _median_s(lambda: read_recording(path), args.repeat)),
            ("replay its polls", _median_s(lambda: replica_series(recording), args.repeat)),
            (
                "rebuild the experiment",
                _median_s(lambda: experiment_from_recording(recording), args.repeat),
            ),
            (
                "build the report (all of the above but reading)",
                _median_s(lambda: build_report(recording, str(path)), args.repeat),
            ),
        ]
        for name, figure in report.figures:
            stages.append((f"draw {name}", _median_s(lambda f=figure: png_bytes(f), args.repeat)))
        out = Path(scratch) / "out"
        stages.append(
            ("write_report, end to end", _median_s(lambda: write_report(path, out), args.repeat))
        )
        print(
            f"recording: {span_s:.0f} s, {path.stat().st_size:,} bytes, {polls} polls, "
            f"{requests} requests; median of {args.repeat} runs"
        )
        for name, seconds in stages:
            print(f"  {name:<50} {seconds:7.3f} s")
        total = stages[-1][1]
        per_hour = total * 3600 / span_s if span_s > 0 else float("nan")
        print(
            f"  per poll {total / max(polls, 1) * 1e3:.2f} ms end to end; an hour at this rate: "
            f"about {per_hour:.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
