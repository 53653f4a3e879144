"""Errors raised while changing the world: a plan refused, or an apply that failed."""

from __future__ import annotations

from slotop.errors import SlotopError


class ActionError(SlotopError):
    """An action cannot be planned or applied; the message says why and what to do."""


class LoadRefusedError(ActionError):
    """A load change breaks a safety rule: a cap, the loopback guard, or the probe's state."""


class SweepError(ActionError):
    """A concurrency sweep cannot be planned, run or resumed: bad steps, settings or a bad file."""
