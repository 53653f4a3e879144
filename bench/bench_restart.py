"""Restart downtime of the simulated replica through slotop's managed-replica path.

Prints the median and spread of the downtime (stop → healthy → verified) of alternating
auto ↔ fp8 restarts, and of the health wait alone. Run from the repo root with the dev venv:

    .venv/bin/python -m bench.bench_restart [--restarts N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import apply_restart, plan_restart
from slotop.actions.restart.verify import replica_verifier
from tests.support.vllm_replica import free_port


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--restarts", type=int, default=6)
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        spec = LaunchSpec(
            url=f"http://127.0.0.1:{port}",
            command=(sys.executable, "-m", "slotop.sim", "--port", str(port)),
            log_path=Path(folder) / "replica.log",
            state_path=Path(folder) / "state.json",
            health_timeout_s=60.0,
            stop_grace_s=5.0,
        )
        replica = ManagedReplica(spec)
        replica.start(Dials("auto"))
        downtimes: list[float] = []
        health: list[float] = []
        try:
            for index in range(args.restarts):
                before = replica.dials or Dials()
                after = Dials("fp8" if index % 2 == 0 else "auto")
                plan = plan_restart(
                    before,
                    after,
                    url=spec.url,
                    how="managed",
                    kv=None,
                    last_downtime_s=replica.last_downtime_s,
                    probe_status=None,
                    drain_timeout_s=1.0,
                    health_timeout_s=spec.health_timeout_s,
                )
                result = apply_restart(plan, replica, replica_verifier(spec.url, api_key=None))
                if result.outcome != "applied" or result.downtime_s is None:
                    raise SystemExit("\n".join(result.lines()))
                downtimes.append(result.downtime_s)
                health += [e.elapsed_s for e in result.events if e.phase == "health"]
        finally:
            replica.stop()
    print(f"restarts: {len(downtimes)} (simulated replica, auto <-> fp8)")
    print(
        f"downtime s: median {statistics.median(downtimes):.2f}, "
        f"min {min(downtimes):.2f}, max {max(downtimes):.2f}"
    )
    print(f"stop → /health 200, s since apply began: median {statistics.median(health):.2f}")


if __name__ == "__main__":
    main()
