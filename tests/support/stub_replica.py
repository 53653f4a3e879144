"""A replica command for restart tests: the simulated replica, unless told to misbehave.

`--hang-on DTYPE`: started with that --kv-cache-dtype, it never answers /health and starts a
child that sleeps too (so stopping it must take the whole group). `--exit-on DTYPE`: started
with that dtype, it says so and exits at once with code 1. `--ignore-sigterm`: it and
its child ignore SIGTERM, so only SIGKILL ends them. `--slow-start-on DTYPE --slow-start S`:
started with that dtype, it waits S seconds before it serves. `--slow-stop S`: asked to stop, it
takes S seconds to go (as a replica draining its requests does). `--say-args`: it first prints
its arguments and environment, as vLLM's start-up log prints its non-default args; `--hf-token`
and `NAME=VALUE` arguments are taken and ignored (secrets a real command line may hold). Other
arguments go to `slotop sim`.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hang-on", default=None)
    parser.add_argument("--exit-on", default=None)
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--slow-start-on", default=None)
    parser.add_argument("--slow-start", type=float, default=0.0)
    parser.add_argument("--slow-stop", type=float, default=0.0)
    parser.add_argument("--say-args", action="store_true")
    parser.add_argument("--hf-token", default=None)
    ours, rest = parser.parse_known_args()
    rest = [a for a in rest if a.startswith("-") or "=" not in a]
    if ours.say_args:
        env = {k: v for k, v in os.environ.items() if k.endswith(("_KEY", "_TOKEN", "SECRET"))}
        print(f"stub replica: non-default args: {sys.argv[1:]!r}; env: {env!r}", flush=True)
    dtype = next((a.split("=", 1)[1] for a in rest if a.startswith("--kv-cache-dtype=")), "auto")
    if ours.exit_on is not None and dtype == ours.exit_on:
        print(f"stub replica: refusing --kv-cache-dtype={dtype}", flush=True)
        sys.exit(1)
    if ours.slow_start_on is not None and dtype == ours.slow_start_on:
        print(f"stub replica: starting slowly ({ours.slow_start:g} s)", flush=True)
        time.sleep(ours.slow_start)
    sim = [sys.executable, "-m", "slotop.sim", *rest]
    if ours.hang_on is None or dtype != ours.hang_on:
        if not ours.slow_stop:
            os.execv(sys.executable, sim)
        child = subprocess.Popen(sim, start_new_session=True)  # stopped by this one, late
        stop_at: list[float] = []

        def slow_stop(signum: int, _frame: object) -> None:
            print(f"stub replica: stopping, in {ours.slow_stop:g} s", flush=True)
            stop_at.append(time.monotonic() + ours.slow_stop)

        signal.signal(signal.SIGTERM, slow_stop)
        while child.poll() is None:
            if stop_at and time.monotonic() >= stop_at[0]:
                child.terminate()
                child.wait()
                sys.exit(0)
            time.sleep(0.05)
        sys.exit(child.returncode)
    if ours.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ours.ignore_sigterm else ""
    subprocess.Popen([sys.executable, "-c", f"import signal, time; {ignore}time.sleep(600)"])
    print(f"stub replica: hanging on --kv-cache-dtype={dtype}", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
