"""Errors raised while reading a replica or a GPU, translated once at the boundary."""

from __future__ import annotations

from slotop.errors import SlotopError


class CollectorError(SlotopError):
    """Reading the world failed; the message says what, with which value, and what to do."""


class ScrapeError(CollectorError):
    """An HTTP request to the replica failed (connect, timeout, status, body)."""


class EndpointMissingError(ScrapeError):
    """The replica answered that a path does not exist (HTTP 404): not a passing failure."""


class MetricsParseError(CollectorError):
    """A /metrics body is not Prometheus text exposition format."""


class ProbeError(CollectorError):
    """The load probe cannot start or obey a command: a bad load shape, value or state."""


class PromptFileError(ProbeError):
    """A prompts file cannot be read or holds a line that is not a usable prompt."""


class ReplicaUrlError(CollectorError):
    """A replica URL slotop cannot use: no http(s) scheme or no host."""
