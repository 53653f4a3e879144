"""The quality check on the real vLLM CPU replica: greedy outputs at one KV dtype against another.

Starts the tiny dummy-weight Llama of tests/support/ once per dtype (each start takes about a
minute on two cores), runs the default prompts greedily on each, and prints the quality report, the
capacity each replica reports, and what the KV budget predicted for the second from the first.
Dummy weights give near-uniform logits, so this checks the plumbing end to end, not what a dtype
does to a trained model's answers.

    .venv/bin/python -m bench.bench_quality_kv_dtype                 # auto against fp8
    .venv/bin/python -m bench.bench_quality_kv_dtype --after bfloat16
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import httpx

from slotop.actions.budget.kv import describe_capacity_change, expected_capacity_change
from slotop.actions.restart.prompts import DEFAULT_PROMPTS
from slotop.actions.restart.quality import GreedyRun, compare_greedy_runs, run_greedy
from slotop.actions.restart.quality_report import format_quality_text
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.snapshot import KvCacheState, kv_cache_state
from tests.support.vllm_replica import ReplicaFlags, VllmReplica, build_tiny_model


def _run(model: Path, folder: Path, dtype: str) -> tuple[GreedyRun, KvCacheState]:
    replica = VllmReplica(model, folder / f"{dtype}.log", ReplicaFlags(kv_cache_dtype=dtype))
    replica.start()
    try:
        with httpx.Client(base_url=replica.url, timeout=300.0) as client:
            run = run_greedy(client, DEFAULT_PROMPTS, ignore_eos=True)
            kv = kv_cache_state(read_metrics_text(client.get("/metrics").text))
    finally:
        replica.stop()
    return run, kv


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="auto", help="KV dtype of the first replica")
    parser.add_argument("--after", default="fp8", help="KV dtype of the second replica")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="slotop-quality-"))
    model = build_tiny_model(folder / "tiny-llama")
    before, kv_before = _run(model, folder, args.before)
    after, kv_after = _run(model, folder, args.after)
    report = compare_greedy_runs(before, after)
    sys.stdout.write(format_quality_text(report))
    print(f"  mean |drift| to 9 places: {report.logprob_abs_drift_mean!r}")
    print(f"blocks: {args.before} {kv_before.blocks_total}, {args.after} {kv_after.blocks_total}")
    predicted = expected_capacity_change(kv_before, args.after, model_dtype="float32")
    print("predicted:", describe_capacity_change(predicted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
