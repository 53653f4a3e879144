"""[load] workers: auto or a whole number, refused with the file, the key and what to do."""

from __future__ import annotations

from typing import Any

import pytest

from slotop.actions.probe_control import load_shape_from_settings
from slotop.collectors.probe.loadshape import MAX_WORKERS
from slotop.config import MAX_PROBE_WORKERS, LoadSettings, settings_from_mapping
from slotop.errors import ConfigError


def load(**values: Any) -> LoadSettings:
    return settings_from_mapping({"load": values}, "slotop.toml").load


def test_workers_are_auto_unless_a_number_is_given() -> None:
    assert LoadSettings().workers == "auto"
    assert load(workers="auto").workers == "auto"
    assert load(workers=3).workers == 3
    assert load_shape_from_settings(load()).workers is None  # None: the probe decides
    assert load_shape_from_settings(load(workers=3)).workers == 3


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0, 'expected "auto", or a whole number from 1 to 64'),
        (65, 'expected "auto", or a whole number from 1 to 64'),
        ("many", 'expected "auto", or a whole number from 1 to 64'),
        (2.5, 'is float; expected "auto" or a whole number'),
        (True, 'is bool; expected "auto" or a whole number'),
    ],
)
def test_a_bad_worker_count_names_the_file_the_key_and_the_choices(value: Any, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(workers=value)
    assert str(caught.value).startswith(f"slotop.toml: [load] workers = {value!r}")
    assert words in str(caught.value)


def test_more_workers_than_streams_is_refused_with_what_to_do() -> None:
    with pytest.raises(ConfigError, match="above max_concurrency = 4") as caught:
        load(workers=8, max_concurrency=4)
    assert "ask for fewer workers, raise the cap" in str(caught.value)


def test_the_settings_cap_is_the_probe_s() -> None:
    assert MAX_PROBE_WORKERS == MAX_WORKERS
