"""Number formatting: None is N/A, units are said, bars and sparklines keep their width."""

from __future__ import annotations

import math

import pytest

from slotop import fmt


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "N/A"),
        (math.nan, "N/A"),
        (0.0, "0.00 ms"),
        (0.00512, "5.12 ms"),
        (0.0399, "39.9 ms"),
        (0.5, "500 ms"),
        (12.0, "12,000 ms"),
    ],
)
def test_ms(seconds: float | None, text: str) -> None:
    assert fmt.ms(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "N/A"), (-1.0, "N/A"), (5.9, "5s"), (61.0, "1m 01s"), (3725.0, "1h 02m")],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert fmt.duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(-3.0, "0:00"), (0, "0:00"), (5.9, "0:05"), (65, "1:05"), (3723, "1:02:03")],
)
def test_clock_span(seconds: float, text: str) -> None:
    assert fmt.clock_span(seconds) == text


@pytest.mark.parametrize(
    ("ratio", "width", "text"),
    [(None, 4, "····"), (0.0, 4, "░░░░"), (0.5, 4, "██░░"), (1.5, 4, "████"), (0.5, 0, "")],
)
def test_bar(ratio: float | None, width: int, text: str) -> None:
    assert fmt.bar(ratio, width) == text


def test_spark_keeps_its_width_and_shows_gaps_as_blanks() -> None:
    line = fmt.spark((1.0, None, 4.0, 2.0), 6)
    assert len(line) == 6
    assert line == "  ▃ █▅"
    assert fmt.spark((1.0, 2.0, 3.0), 2) == "▆█"  # only the newest values that fit


def test_percent_and_number_say_na_for_none() -> None:
    assert fmt.percent(None) == "N/A"
    assert fmt.percent(0.1234) == "12.3%"
    assert fmt.number(None) == "N/A"
    assert fmt.number(12345.678, 1, " tok/s") == "12,345.7 tok/s"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "N/A"), (5.0, "<1m"), (61.0, "1m"), (119.0, "1m"), (3725.0, "1h 02m")],
)
def test_coarse_duration_changes_once_a_minute(seconds: float | None, text: str) -> None:
    assert fmt.coarse_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "up N/A"),
        (-1.0, "up N/A"),
        (59.0, "up <1m"),
        (42 * 60 + 5.0, "up 42m"),
        (3 * 3600 + 12 * 60 + 59.0, "up 3h12m"),
        (5 * 86400 + 3 * 3600 + 59 * 60.0, "up 5d03h"),
    ],
)
def test_uptime_to_the_minute(seconds: float | None, text: str) -> None:
    assert fmt.uptime(seconds) == text
