"""The replay's transport on a made-up wall clock, and times as an operator types them."""

from __future__ import annotations

import time

import pytest

from slotop.tui.replay.clock import ReplayTransport, parse_position

START, END = 1_800_000_000.0, 1_800_003_600.0


class Wall:
    def __init__(self) -> None:
        self.t_s = 100.0

    def __call__(self) -> float:
        return self.t_s


def test_it_plays_at_its_speed_pauses_and_stops_at_the_end() -> None:
    wall = Wall()
    transport = ReplayTransport(START, END, speed=2.0, wall=wall)
    wall.t_s += 10
    assert transport.now() == START + 20
    transport.pause()
    wall.t_s += 10
    assert transport.now() == START + 20 and not transport.playing
    assert transport.toggle()
    wall.t_s += 5000
    assert transport.now() == END and not transport.playing
    assert transport.toggle()  # at the end, play starts over
    assert transport.now() == START


def test_seeks_are_held_inside_the_recording() -> None:
    transport = ReplayTransport(START, END, playing=False, wall=Wall())
    assert transport.seek(START - 50) == START
    assert transport.seek(END + 50) == END
    assert transport.seek(START + 61.5) == START + 61.5


def test_the_speed_steps_through_its_choices() -> None:
    transport = ReplayTransport(START, END, speed=3.0, playing=False, wall=Wall())
    assert transport.faster(1) == 5.0  # 3× (from --speed) steps to the next choice up
    assert transport.faster(1) == 10.0
    assert transport.faster(5) == 60.0
    assert transport.faster(-2) == 5.0
    assert transport.faster(-9) == 1.0


def test_it_waits_where_the_recording_has_been_read_to() -> None:
    wall = Wall()
    transport = ReplayTransport(START, END, speed=10.0, wall=wall)
    transport.set_horizon(START + 30)
    wall.t_s += 10
    assert transport.now() == START + 30  # not the 100 s its speed would reach
    transport.set_horizon(START + 200)
    wall.t_s += 1
    assert transport.now() == START + 40
    assert transport.seek(START + 500) == START + 500  # a seek goes past: the read catches up
    assert transport.now() == START + 500


def test_a_speed_must_be_above_zero() -> None:
    with pytest.raises(ValueError, match="above 0"):
        ReplayTransport(START, END, speed=0.0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("start", START),
        ("end", END),
        ("+90", START + 90),
        ("+1:30", START + 90),
        ("+1:02:03", START + 3723),
        ("+0:00.5", START + 0.5),
        ("-30", END - 30),
        ("-1:00", END - 60),
    ],
)
def test_offsets_and_edges(text: str, expected: float) -> None:
    assert parse_position(text, START, END) == expected


def test_a_clock_time_is_the_recordings_day() -> None:
    day = time.localtime(START)
    expected = time.mktime((day.tm_year, day.tm_mon, day.tm_mday, day.tm_hour, 30, 15, 0, 0, -1))
    text = f"{day.tm_hour}:30:15"
    assert parse_position(text, START, END) == expected
    assert parse_position(f"{day.tm_hour:02d}:30", START, END) == expected - 15


def test_a_clock_time_past_midnight_is_the_next_day() -> None:
    day = time.localtime(START)
    midnight = time.mktime((day.tm_year, day.tm_mon, day.tm_mday + 1, 0, 0, 0, 0, 0, -1))
    start, end = midnight - 600, midnight + 600  # ten minutes either side of midnight
    assert parse_position("00:05", start, end) == midnight + 300


@pytest.mark.parametrize("text", ["soon", "+", "+1:2:3:4", "25:00", "10:61", "+a", ""])
def test_what_is_no_time_is_refused_with_what_is(text: str) -> None:
    with pytest.raises(ValueError, match=r"is no time in the recording; give start, end, \+OFFSET"):
        parse_position(text, START, END)
