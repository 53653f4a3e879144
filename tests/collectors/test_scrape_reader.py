"""A replica's reader that places each scrape's values by the last body's shape reads every
body exactly as a fresh parse does: the same shape, a changed one, and back again."""

from __future__ import annotations

import re

import pytest

from slotop.collectors.errors import MetricsParseError
from slotop.collectors.names import SCRAPED_PREFIXES
from slotop.collectors.parse import parse_metrics
from slotop.collectors.reading import Reading, ScrapeReader, gauge_total, read_exposition
from tests.support.paths import CAPTURES

NAMES = sorted(path.name for path in CAPTURES.glob("vllm-*.txt"))
TEXTS = {name: (CAPTURES / name).read_text("utf-8") for name in NAMES}


def _fresh(text: str) -> Reading:
    return read_exposition(parse_metrics(text, prefix=SCRAPED_PREFIXES))


def test_every_capture_reads_as_a_fresh_parse_in_any_order() -> None:
    reader = ScrapeReader()
    for name in [*NAMES, *reversed(NAMES), NAMES[0], NAMES[0]]:
        assert reader.read(TEXTS[name]) == _fresh(TEXTS[name]), name


def _with_running(text: str, value: str) -> str:
    return re.sub(r"^(vllm:num_requests_running\{[^}]*\}) \S+$", rf"\1 {value}", text, flags=re.M)


def test_new_values_in_the_same_shape_land_where_they_belong() -> None:
    load = TEXTS["vllm-0.32-cpu-load.txt"]
    reader = ScrapeReader()
    reader.read(load)
    for value in ("7.0", "0.0", "NaN", "123"):
        changed = _with_running(load, value)
        reading = reader.read(changed)
        fresh = _fresh(changed)
        if value == "NaN":  # NaN equals nothing: compare what is shown of it instead
            assert gauge_total(reading, "requests_running") == gauge_total(
                fresh, "requests_running"
            )
            continue
        assert reading == fresh
        assert gauge_total(reading, "requests_running") == float(value)


def test_a_bad_body_is_refused_and_the_next_good_one_still_reads() -> None:
    reader = ScrapeReader()
    load = TEXTS["vllm-0.32-cpu-load.txt"]
    reader.read(load)
    with pytest.raises(MetricsParseError, match="appears twice"):
        reader.read(load + load)
    assert reader.read(load) == _fresh(load)


def test_series_of_families_not_read_are_named_but_never_parsed_or_kept() -> None:
    extra = "".join(
        f'vllm:adapter_requests{{adapter="a{i}"}} {i}\nother_family{{x="{i}"}} 1\n'
        for i in range(2_000)
    )
    text = TEXTS["vllm-0.32-cpu-load.txt"] + "# TYPE vllm:adapter_requests gauge\n" + extra
    reader = ScrapeReader()
    for _ in range(2):
        reading = reader.read(text)
        assert reading == _fresh(text)
    assert "vllm:adapter_requests" in reading.unknown
    remembered = reader.parser._series
    assert not any("adapter" in line or "other_family" in line for line in remembered)
    with pytest.raises(MetricsParseError, match="line"):
        reader.read(text + 'vllm:adapter_requests{adapter="cut" 1\n')  # still checked for shape
