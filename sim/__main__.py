"""Run the simulated replica standalone: ``python -m slotop.sim [vllm serve flags]``."""

from __future__ import annotations

import sys

from slotop.sim.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
