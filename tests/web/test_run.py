"""What listening on an address exposes, as `slotop web` says it when it starts."""

from __future__ import annotations

import pytest

from slotop.web.run import exposure


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_exposes_nothing(host: str) -> None:
    assert exposure(host) is None


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("0.0.0.0", "every network this machine is on"),
        ("::", "every network this machine is on"),
        ("10.1.2.3", "the network of 10.1.2.3"),
        ("gpu-box.lan", "gpu-box.lan (whatever that name leads to)"),
    ],
)
def test_any_other_address_is_named_with_what_it_reaches(host: str, said: str) -> None:
    assert exposure(host) == said
