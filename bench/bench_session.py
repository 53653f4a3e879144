"""How many bytes a session recording costs: a replica under load, scraped once a second.

Records a session as the dashboard does (a monitor polled every `--interval-s`, the probe at
`--concurrency` drained once a second, the GPU reading when it changes) for `--seconds`, then
prints bytes/s, MB/h and lines/s, in all and per line kind, against the 10 MB/h budget.

Replicas (`--server`): `sim` (the simulated replica, `--model` from its tables on an H100),
`vllm` (the tiny vLLM CPU replica the tests use; needs .ci/install-vllm).

    .venv/bin/python -m bench.bench_session
    .venv/bin/python -m bench.bench_session --server sim --model qwen2.5-0.5b --seconds 120
    .venv/bin/python -m bench.bench_session --server vllm --concurrency 4 --output-tokens 32
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from slotop.actions.session.recorder import start_recording
from slotop.actions.session.taps import RecordingGpu, record_monitor
from slotop.actions.wiring.replica import probe_control, replica_client, replica_monitor, with_url
from slotop.collectors.gpu.reader import GpuReader
from slotop.config import Settings, with_overrides
from tests.support.sim_replica import run_sim
from tests.support.vllm_replica import VllmReplica, build_tiny_model

BUDGET_MB_PER_H = 10.0


@contextlib.contextmanager
def _replica(server: str, model: str, scratch: Path) -> Iterator[str]:
    if server == "sim":
        with contextlib.contextmanager(run_sim)(model=model) as url:
            yield url
        return
    replica = VllmReplica(build_tiny_model(scratch / "tiny-llama"), scratch / "vllm.log")
    replica.start()
    try:
        yield replica.url
    finally:
        replica.stop()


def _record(settings: Settings, path: Path, seconds: float, concurrency: int) -> float:
    """Record a loaded session for `seconds`; return how long it ran."""
    recorder = start_recording(command="attach", settings=settings, path=path)
    if recorder.failure is not None:
        raise SystemExit(recorder.failure)
    control = probe_control(settings, recorder=recorder)
    gpu = RecordingGpu(GpuReader(), recorder)
    interval_s = settings.replica.scrape_interval_s
    with replica_client(settings) as client:
        monitor = record_monitor(replica_monitor(settings, client), recorder)
        control.apply(control.plan_start(concurrency=concurrency))
        started = time.monotonic()
        try:
            while time.monotonic() - started < seconds:
                tick = time.monotonic()
                monitor.poll()
                gpu.read()
                probe = control.probe
                if probe is not None:
                    probe.drain_records()
                time.sleep(max(0.0, interval_s - (time.monotonic() - tick)))
        finally:
            control.apply(control.plan_stop())
            gpu.close()
    ran_s = time.monotonic() - started
    recorder.close()
    return ran_s


def _report(path: Path, ran_s: float) -> None:
    sizes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    requests = 0
    with path.open(encoding="utf-8") as stream:
        for number, line in enumerate(stream):
            kind = "header" if number == 0 else json.loads(line)["kind"]
            sizes[kind] += len(line.encode("utf-8"))
            counts[kind] += 1
            if kind == "probe_records":
                requests += len(json.loads(line)["rows"])
    total = sum(sizes.values())
    per_h = total / ran_s * 3600 / 1e6
    print(f"recorded {ran_s:.0f} s: {total:,} bytes, {sum(counts.values())} lines")
    print(
        f"  {total / ran_s:,.0f} bytes/s  {per_h:.2f} MB/h  {sum(counts.values()) / ran_s:.2f} lines/s"
    )
    print(f"  probe requests recorded: {requests / ran_s:.1f}/s")
    print(f"  budget {BUDGET_MB_PER_H:g} MB/h: {'within' if per_h <= BUDGET_MB_PER_H else 'OVER'}")
    print(f"  {'kind':<14} {'lines/s':>8} {'bytes/s':>9} {'MB/h':>7}")
    for kind, size in sizes.most_common():
        print(
            f"  {kind:<14} {counts[kind] / ran_s:8.2f} {size / ran_s:9,.0f} "
            f"{size / ran_s * 3600 / 1e6:7.2f}"
        )


def main() -> int:
    """Record one loaded session and print what it cost."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--server", choices=("sim", "vllm"), default="sim")
    parser.add_argument("--model", default="llama-3.1-8b", help="simulated model (sim only)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to record")
    parser.add_argument("--concurrency", type=int, default=16, help="probe requests in flight")
    parser.add_argument("--output-tokens", type=int, default=128, help="tokens per request")
    parser.add_argument("--interval-s", type=float, default=1.0, help="scrape interval")
    parser.add_argument("--itl-gaps", action="store_true", help="keep every gap ([session])")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory(prefix="slotop-bench-session-") as scratch,
        _replica(args.server, args.model, Path(scratch)) as url,
    ):
        settings = with_overrides(
            with_url(Settings(), url),
            {
                "replica.scrape_interval_s": args.interval_s,
                "load.output_tokens": args.output_tokens,
                "session.itl_gaps": args.itl_gaps,
            },
        )
        path = Path(scratch) / "session.jsonl"
        what = args.model if args.server == "sim" else "tiny vLLM CPU replica"
        print(
            f"{args.server} ({what}), probe concurrency {args.concurrency}, "
            f"{args.output_tokens} output tokens, scrape every {args.interval_s:g} s, "
            f"itl_gaps {'on' if args.itl_gaps else 'off'}"
        )
        ran_s = _record(settings, path, args.seconds, args.concurrency)
        _report(path, ran_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
