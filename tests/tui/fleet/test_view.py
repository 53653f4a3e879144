"""The fleet table's names and columns: URLs shown as host:port, the state beside the verdict."""

from __future__ import annotations

import pytest

from slotop.tui.fleet.view import columns, short_names


@pytest.mark.parametrize(
    ("names", "shown"),
    [
        (
            ["http://127.0.0.1:8000", "http://127.0.0.1:8001"],
            ["127.0.0.1:8000", "127.0.0.1:8001"],
        ),
        (
            ["https://gpu1.example:8443/", "http://h:8000/vllm/"],
            ["gpu1.example:8443", "h:8000/vllm"],
        ),
        # Apart only by their scheme: each keeps its whole URL, the one next to it its own.
        (
            ["http://h:8000", "https://h:8000", "http://g:8000"],
            ["http://h:8000", "https://h:8000", "g:8000"],
        ),
        # Prometheus's labels, and a URL shared by two models (named with the model): as they are.
        (
            ["a:1", "localhost:8000", "vllm/10.0.0.1:8000", "http://h:8000 m1", "http://h:8000 m2"],
            ["a:1", "localhost:8000", "vllm/10.0.0.1:8000", "http://h:8000 m1", "http://h:8000 m2"],
        ),
    ],
)
def test_a_url_shows_as_host_port_where_the_names_stay_apart(
    names: list[str], shown: list[str]
) -> None:
    assert short_names(names) == dict(zip(names, shown, strict=True))


@pytest.mark.parametrize("narrow", [True, False])
def test_the_state_stands_right_after_the_verdict_at_any_width(narrow: bool) -> None:
    keys = [column.key for column in columns((99.0, 99.0), narrow=narrow)]
    assert keys[keys.index("slo") + 1] == "state"
