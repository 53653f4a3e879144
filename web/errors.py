"""Errors of `slotop web`, each saying what failed and what to do."""

from __future__ import annotations

from slotop.errors import SlotopError


class WebError(SlotopError):
    """The dashboard cannot be served: a port, an address, a missing package, an app that died."""
