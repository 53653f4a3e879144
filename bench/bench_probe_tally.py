"""What the dashboard's probe poll costs the parent process, per poll and per record.

Every second the live feed hands the records the probe sent to its tally (`tui/probe_tally.py`),
takes the view of both windows (client statistics, with percentile intervals and the client
error) and asks for the current configuration's curve; the recorder encodes the same records
(`actions/session/lines.py`). This bench feeds that path records shaped as the probe makes them,
no replica and no terminal: --rate requests a second, each --output-tokens chunks apart by
gaps of a few ms, with one chunk lag per chunk, at one concurrency for --seconds of probe time
(the windows fill and the curve's segment grows as they do live). It prints the CPU each step
took per poll (median over the last --tail polls, by then the long window is full) and per record.

    .venv/bin/python -m bench.bench_probe_tally
    .venv/bin/python -m bench.bench_probe_tally --rate 35 --seconds 180
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from slotop.actions.session.lines import probe_records_line
from slotop.collectors.probe.records import EventKind, ProbeEvent, ProbeRecord
from slotop.tui.probe_tally import ProbeTally

START_S = 1_700_000_000.0
T = TypeVar("T")


def make_records(
    rng: np.random.Generator, first_id: int, count: int, done_at_s: float, tokens: int
) -> list[ProbeRecord]:
    """`count` requests that ended at `done_at_s`, each streamed `tokens` chunks."""
    records = []
    for offset in range(count):
        gaps = rng.lognormal(np.log(0.02), 0.3, tokens - 1)
        lags = rng.exponential(0.0002, tokens)
        ttft = float(rng.lognormal(np.log(0.05), 0.2))
        e2e = ttft + float(gaps.sum())
        records.append(
            ProbeRecord(
                request_id=first_id + offset,
                step=0,
                sent_at_s=done_at_s - e2e,
                done_at_s=done_at_s,
                in_flight_at_send=16,
                planned_prompt_tokens=256,
                planned_output_tokens=tokens,
                ttft_s=ttft,
                itl_s=tuple(float(g) for g in gaps),
                e2e_s=e2e,
                chunk_count=tokens,
                prompt_tokens=256,
                output_tokens=tokens,
                finish_reason="length",
                error=None,
                lag_s=tuple(float(x) for x in lags),
            )
        )
    return records


def timed(steps: list[float], work: Callable[..., T], *args: Any) -> T:
    """`work(*args)`, its CPU time (this thread's) appended to `steps` in ms."""
    begin = time.thread_time()
    result = work(*args)
    steps.append((time.thread_time() - begin) * 1e3)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10.0, help="requests ended per second")
    parser.add_argument("--output-tokens", type=int, default=256)
    parser.add_argument("--seconds", type=int, default=120, help="polls, one a probe second")
    parser.add_argument("--tail", type=int, default=30, help="last polls the medians are over")
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    tally = ProbeTally(
        long_window_s=60.0,
        short_window_s=10.0,
        slo_percentiles=(99.0, 99.0),
        goodput_targets=None,
        opened_at_s=START_S - 1.0,
    )
    started = ProbeEvent(START_S, EventKind.STARTED, 0, "closed", 16)
    steps: dict[str, list[float]] = {"tally": [], "view": [], "curve": [], "recorder": []}
    owed, next_id, records_per_poll = 0.0, 0, []
    for second in range(1, args.seconds + 1):
        now = START_S + second
        owed += args.rate
        count, owed = int(owed), owed - int(owed)
        records = make_records(rng, next_id, count, now - 0.5, args.output_tokens)
        next_id += count
        events = [started] if second == 1 else []
        polled = timed(steps["tally"], tally.read_polled, records, events, None, now)
        timed(steps["view"], polled.get)
        timed(steps["curve"], tally.changed_curves)
        timed(steps["recorder"], probe_records_line, now, records, START_S)
        records_per_poll.append(count)

    tail = slice(-args.tail, None)
    per_poll = statistics.median(records_per_poll[tail])
    print(
        f"{args.rate:g} requests/s of {args.output_tokens} chunks, {args.seconds} polls; "
        f"medians over the last {args.tail} (long window 60 s, short 10 s)"
    )
    print(f"{'step':<10} {'CPU ms/poll':>12} {'µs/record':>10}")
    total = 0.0
    for name, times in steps.items():
        median = statistics.median(times[tail])
        total += median
        print(f"{name:<10} {median:12.2f} {1e3 * median / max(per_poll, 1):10.1f}")
    print(f"{'all':<10} {total:12.2f} {1e3 * total / max(per_poll, 1):10.1f}")
    print(f"share of one core at one poll a second: {total / 10:.2f}%")


if __name__ == "__main__":
    main()
