"""`slotop tune` against a full grid of the same dials, and against the peers' searches, on the
simulated replica.

`--scenarios` (the default mode) runs the four scenarios of `tests/support/tune_scenarios.py`
(seq-cap, kv-fp8, token-budget, activation: each a replica whose best configuration only a full
grid knows) in the simulated engine's virtual time: the real `TuneRunner` from the scenario's
starting dials, then every cell of the grid restarted into and swept as a tune candidate is
(refined, the same timing), a restart priced at `--restart-s` seconds. It prints, per scenario,
the grid's best and the tune's choice (configuration, concurrency, goodput ± its 95% band,
share of the best, restarts, requests, seconds) and the pass criteria, then the grid's best
configuration swept `--repeats` times more with seeds of their own (how far its operating point
and goodput move when only run again); `--json FILE` writes one object per scenario. Virtual time makes it deterministic and fast: minutes of load in seconds.

`--peers aiperf,vllm-bench` searches the same scenarios on the real-time simulated replica
(`slotop sim` with each scenario's flags) with slotop's tune and with the peers' searches, each
counted the same way (requests the replica received, seconds, restarts); see
`bench/tune_peers.py`. A peer whose environment is missing is skipped with a message.

`--vllm` runs `slotop tune` and a 2 × 2 grid (max_num_seqs 1, 4 × max_num_batched_tokens 2,048,
1,024) on the real vLLM CPU replica the tests use (the tiny Llama, from max_num_seqs 1), each
cell restarted into and swept as a tune trial is, `--dwell-s` a step; it prints each cell's
goodput beside tune's own measure of it, both searches' restarts, requests and seconds with the
load average, and whether tune's choice is the grid's best or within the band of the difference;
see `bench/tune_vllm.py`. It needs the vLLM environment (.ci/install-vllm) and takes minutes.

    .venv/bin/python -m bench.bench_tune --scenarios all [--json FILE]
    .venv/bin/python -m bench.bench_tune --scenarios token-budget --peers aiperf,vllm-bench \\
        [--dwell-s 10] [--json FILE]
    .venv/bin/python -m bench.bench_tune --vllm [--dwell-s 5] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from bench.tune_table import Row, measure, table
from tests.support.tune_scenarios import SCENARIOS
from tests.support.virtual_tune import RESTART_S

PEERS = ("aiperf", "vllm-bench")


def _names(value: str) -> list[str]:
    if value.strip() == "all":
        return list(SCENARIOS)
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [name for name in names if name not in SCENARIOS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scenario {', '.join(unknown)}: choose from {', '.join(SCENARIOS)} or all"
        )
    return names


def _peers(value: str) -> list[str]:
    if value.strip() == "none":
        return []
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [name for name in names if name not in PEERS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown peer {', '.join(unknown)}: choose from {', '.join(PEERS)}"
        )
    return names


def _write_json(path: Path | None, data: list[dict[str, Any]]) -> None:
    if path is not None:
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def virtual(
    names: list[str], seed: int, restart_s: float, json_path: Path | None, repeats: int
) -> None:
    """Tune and the full grid per scenario in virtual time; the table, and the JSON."""
    rows: list[Row] = []
    print(f"virtual time; a restart costs {restart_s:g} s; seed {seed}", flush=True)
    for name in names:
        scenario = SCENARIOS[name]
        print(f"{name}: {scenario.words}; {len(scenario.grid)} grid cells", flush=True)
        rows.append(measure(scenario, seed=seed, restart_s=restart_s, repeats=repeats))
        _write_json(json_path, [row.to_json() for row in rows])
    print()
    print(table(rows))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--scenarios",
        type=_names,
        default=list(SCENARIOS),
        help=f"comma list of {', '.join(SCENARIOS)}, or all (default all)",
    )
    parser.add_argument("--json", type=Path, help="write one object per scenario to FILE")
    parser.add_argument("--seed", type=int, default=0, help="the virtual runs' seed (default 0)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=4,
        help="sweep the grid's best configuration this many times more, each with a seed of its "
        "own, to show how far its operating point and goodput move when only run again "
        "(virtual mode; default 4, 0 skips)",
    )
    parser.add_argument(
        "--restart-s",
        type=float,
        default=RESTART_S,
        help=f"virtual seconds one restart costs (default {RESTART_S:g})",
    )
    parser.add_argument(
        "--peers",
        type=_peers,
        help="real time: slotop tune and these peers' searches (aiperf, vllm-bench; none: "
        "slotop's alone)",
    )
    parser.add_argument(
        "--vllm",
        action="store_true",
        help="real time: slotop tune and a 2 × 2 grid on the real vLLM CPU replica",
    )
    parser.add_argument(
        "--dwell-s",
        type=float,
        default=10.0,
        help="real time: seconds slotop measures a step, and aiperf an iteration (default 10; "
        "virtual runs keep the scenario's own)",
    )
    parser.add_argument(
        "--vllm-bench-cells",
        default="",
        help="real time: the grid cells vllm-bench searches, as dtype/seqs/tokens;… (default: "
        "the scenario's whole grid)",
    )
    parser.add_argument(
        "--aiperf-cells",
        default="",
        help="real time: the grid cells aiperf searches, as dtype/seqs/tokens;… (default: the "
        "scenario's whole grid; a part is also shown scaled to the whole)",
    )
    parser.add_argument(
        "--burst-prompts",
        type=int,
        default=200,
        help="real time: vllm-bench's prompts at request rate inf, per cell (default 200)",
    )
    parser.add_argument(
        "--rate-prompts",
        type=int,
        default=100,
        help="real time: vllm-bench's prompts at each lower rate (default 100)",
    )
    parser.add_argument(
        "--aiperf-timeout-s",
        type=float,
        default=1800.0,
        help="real time: the longest one aiperf search may run, per cell (default 1800)",
    )
    args = parser.parse_args()
    if args.repeats < 0:
        parser.error(f"--repeats {args.repeats}: give 0 or more sweeps")
    if args.vllm:
        # a SIGTERM unwinds like Ctrl-C, so the replica is stopped
        signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
        from bench.tune_vllm import run_vllm

        _write_json(args.json, [run_vllm(args.dwell_s)])
        return
    if args.peers is None:
        virtual(args.scenarios, args.seed, args.restart_s, args.json, args.repeats)
        return
    # a SIGTERM unwinds like Ctrl-C, so the replicas and the peers' processes are stopped
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    from bench.tune_peers import PeerPlan, run_peers

    plan = PeerPlan(
        dwell_s=args.dwell_s,
        vllm_cells=args.vllm_bench_cells,
        aiperf_cells=args.aiperf_cells,
        burst_prompts=args.burst_prompts,
        rate_prompts=args.rate_prompts,
        aiperf_timeout_s=args.aiperf_timeout_s,
    )
    data = run_peers(args.scenarios, args.peers, plan)
    _write_json(args.json, data)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
