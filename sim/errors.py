"""The simulated replica's exception tree; the sim imports nothing else of slotop, so it has its own root."""

from __future__ import annotations


class SimError(Exception):
    """Something the simulated replica cannot do, told in words a person can act on."""


class SimConfigError(SimError):
    """A flag, table entry or config.json holds a value the simulated replica cannot use."""


class KvCapacityError(SimConfigError):
    """The KV cache left after weights and activations cannot hold one request of max_model_len."""


class RequestRejectedError(SimError):
    """A request the engine can never serve (too long for max_model_len), refused at submit."""


class DuplicateRequestError(SimError):
    """A request id that the engine already holds."""
