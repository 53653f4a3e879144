"""Run slotop as ``python -m slotop``."""

from __future__ import annotations

import sys

from slotop.cli import main

if __name__ == "__main__":
    sys.exit(main())
