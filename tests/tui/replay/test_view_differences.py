"""The replay checks' comparer: a number may move by what the recording keeps, and no further."""

from __future__ import annotations

from tests.support.replay_session import differences


def test_whole_milliseconds_may_round_the_other_way_at_a_half() -> None:
    # 592.49979 ms replayed where live had 592.5 and a little: the gap kept to the microsecond
    assert list(differences("593 ms", "592 ms")) == []
    assert list(differences("1,000 ms", "999 ms")) == []
    assert list(differences("99.9 ms", "100 ms")) == []


def test_whole_milliseconds_further_apart_differ() -> None:
    assert list(differences("594 ms", "592 ms")) == ["view: '594 ms' != '592 ms' (594 against 592)"]


def test_a_number_with_decimals_may_move_by_its_last_digit() -> None:
    assert list(differences("12.3 ms", "12.4 ms")) == []
    assert list(differences("12.3 ms", "12.5 ms")) == [
        "view: '12.3 ms' != '12.5 ms' (12.3 against 12.5)"
    ]


def test_other_whole_numbers_and_words_must_be_equal() -> None:
    assert list(differences("12 requests", "13 requests")) == [
        "view: '12 requests' != '13 requests' (a whole number differs)"
    ]
    assert list(differences("593 s", "592 s")) == [
        "view: '593 s' != '592 s' (a whole number differs)"
    ]
    assert list(differences("593 ms ok", "593 ms bad")) == ["view: '593 ms ok' != '593 ms bad'"]
