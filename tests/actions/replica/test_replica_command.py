"""A replica slotop did not start, restarted through [launch] restart_command, with rollback."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotop.actions.replica.external import CommandReplica
from slotop.actions.replica.spec import Dials, LaunchError, LaunchSpec
from slotop.actions.restart.apply import apply_restart, plan_restart
from slotop.actions.restart.verify import replica_verifier
from tests.support.vllm_replica import free_port

# Stands in for systemd or a container runtime: stops the replica its PID file names, starts a
# new one in a session of its own (so it outlives this command), refuses "--kv-cache-dtype=bad".
SUPERVISOR = """
import os, signal, subprocess, sys, time
pidfile, port, *dials = sys.argv[1:]
if "--kv-cache-dtype=bad" in dials:
    print("supervisor: refusing --kv-cache-dtype=bad", flush=True)
    sys.exit(3)
try:
    old = int(open(pidfile).read())
    os.kill(old, signal.SIGTERM)
    while os.path.exists(f"/proc/{old}") and open(f"/proc/{old}/stat").read().split()[2] != "Z":
        time.sleep(0.05)
except (FileNotFoundError, ProcessLookupError):
    pass
child = subprocess.Popen(
    [sys.executable, "-m", "slotop.sim", "--host", "127.0.0.1", "--port", port, *dials],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
)
open(pidfile, "w").write(str(child.pid))
print(f"supervisor: started {child.pid} with {dials}", flush=True)
"""


@pytest.fixture
def supervised(tmp_path: Path) -> Iterator[LaunchSpec]:
    """A spec whose restart command is the stand-in supervisor; its replica is killed after."""
    port = free_port()
    script = tmp_path / "supervisor.py"
    script.write_text(SUPERVISOR, encoding="utf-8")
    pidfile = tmp_path / "replica.pid"
    spec = LaunchSpec(
        url=f"http://127.0.0.1:{port}",
        command=(),
        log_path=tmp_path / "restart.log",
        state_path=tmp_path / "state.json",
        health_timeout_s=30.0,
        restart_command=(sys.executable, str(script), str(pidfile), str(port), "{dial_args}"),
    )
    try:
        yield spec
    finally:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError, ValueError):
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.05)


def test_without_a_restart_command_there_is_nothing_to_run(tmp_path: Path) -> None:
    spec = LaunchSpec(url="http://127.0.0.1:1", command=(), state_path=tmp_path / "s.json")
    with pytest.raises(LaunchError, match="no \\[launch\\] restart_command is set"):
        CommandReplica(spec, Dials())


@pytest.mark.slow
def test_the_restart_command_applies_dials_and_rolls_back_a_refused_one(
    supervised: LaunchSpec,
) -> None:
    replica = CommandReplica(supervised, Dials())
    replica.spawn(Dials())  # bring the "system" replica up, as its supervisor would
    replica.wait_healthy()
    verify = replica_verifier(supervised.url, api_key=None)

    def plan(after: Dials):  # type: ignore[no-untyped-def]
        return plan_restart(
            replica.dials or Dials(),
            after,
            url=supervised.url,
            how="command",
            kv=None,
            last_downtime_s=replica.last_downtime_s,
            probe_status=None,
            drain_timeout_s=1.0,
            health_timeout_s=30.0,
        )

    applied = apply_restart(plan(Dials("fp8")), replica, verify)
    assert applied.outcome == "applied", "\n".join(applied.lines())
    assert "Restart http://127.0.0.1" in plan(Dials("bad")).lines()[0]
    assert "run the configured restart command" in plan(Dials("bad")).lines()[0]
    refused = apply_restart(plan(Dials("bad")), replica, verify)
    assert refused.outcome == "rolled_back"
    assert "the restart command exited with code 3" in (refused.failure or "")
    assert "supervisor: refusing --kv-cache-dtype=bad" in refused.failure_log_tail
    assert replica.dials == Dials("fp8")
    assert refused.verification is not None and refused.verification.ok
    assert refused.verification.kv is not None and refused.verification.kv.cache_dtype == "fp8"
