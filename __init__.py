"""slotop: attach to a vLLM replica, watch its latency SLO, and tune it live."""

from __future__ import annotations

__version__ = "0.1.0"
