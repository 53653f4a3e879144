"""The root of slotop's exception tree; each layer derives its own from it."""

from __future__ import annotations


class SlotopError(Exception):
    """Something slotop cannot do, told in words a person can act on."""


class ConfigError(SlotopError):
    """A settings file or flag holds a value slotop cannot use."""
