"""A replica command for restart tests: the simulated replica, unless told to misbehave.

`--hang-on DTYPE`: started with that --kv-cache-dtype, it never answers /health and starts a
child that sleeps too (so stopping it must take the whole group). `--ignore-sigterm`: it and
its child ignore SIGTERM, so only SIGKILL ends them. Other arguments go to `slotop sim`.
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
    parser.add_argument("--ignore-sigterm", action="store_true")
    ours, rest = parser.parse_known_args()
    dtype = next((a.split("=", 1)[1] for a in rest if a.startswith("--kv-cache-dtype=")), "auto")
    if ours.hang_on is None or dtype != ours.hang_on:
        os.execv(sys.executable, [sys.executable, "-m", "slotop.sim", *rest])
    if ours.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if ours.ignore_sigterm else ""
    subprocess.Popen([sys.executable, "-c", f"import signal, time; {ignore}time.sleep(600)"])
    print(f"stub replica: hanging on --kv-cache-dtype={dtype}", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
