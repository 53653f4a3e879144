"""What the real vLLM CPU replica costs the test suite: start-to-healthy, stop, and a small load.

Starts the tiny dummy-weight replica of tests/support/vllm_replica.py a few times in a row and
prints the median and spread of start-to-/health seconds and SIGTERM-to-gone seconds, then the
client-side TTFT and throughput of one streaming load. Needs the vLLM venv (.ci/install-vllm).

    .venv/bin/python -m bench.bench_vllm_replica              # 3 starts
    .venv/bin/python -m bench.bench_vllm_replica --starts 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.support.vllm_replica import VllmReplica, build_tiny_model, drive_load


def main() -> int:
    """Time the starts, the stops and one load, and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=3, help="how many start/stop cycles")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="slotop-bench-") as scratch:
        began = time.monotonic()
        model_dir = build_tiny_model(Path(scratch) / "tiny-llama")
        print(f"tiny model generated in {time.monotonic() - began:.2f} s")
        replica = VllmReplica(model_dir, Path(scratch) / "vllm.log")
        starts: list[float] = []
        stops: list[float] = []
        for cycle in range(args.starts):
            replica.start()
            assert replica.last_startup_s is not None
            starts.append(replica.last_startup_s)
            if cycle == args.starts - 1:
                result = drive_load(
                    replica.url, concurrency=8, requests=32, max_tokens=128, prompt_tokens=256
                )
                ttfts = sorted(r.ttft_s for r in result.records if r.ttft_s is not None)
                tokens = sum(r.completion_tokens or 0 for r in result.records)
                print(
                    f"load 8 clients x 32 requests (256 in, 128 out): {result.wall_s:.2f} s, "
                    f"{tokens / result.wall_s:.0f} output tok/s, TTFT median "
                    f"{statistics.median(ttfts) * 1000:.0f} ms, max {ttfts[-1] * 1000:.0f} ms, "
                    f"errors {len(result.errors)}"
                )
            stopped = time.monotonic()
            replica.stop()
            stops.append(time.monotonic() - stopped)
        print(
            f"start-to-healthy over {len(starts)} starts: median {statistics.median(starts):.1f} s "
            f"(min {min(starts):.1f}, max {max(starts):.1f})"
        )
        print(
            f"stop (SIGTERM to group gone): median {statistics.median(stops):.1f} s "
            f"(max {max(stops):.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
