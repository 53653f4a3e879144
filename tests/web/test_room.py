"""Who holds the control of a shared dashboard, and how large it is, worked through by hand."""

from __future__ import annotations

from slotop.web.room import Room


def test_the_first_viewer_alone_holds_the_control_and_the_next_watches() -> None:
    room = Room()
    first = room.join("127.0.0.1", None, 160, 50, now_s=100.0)
    second = room.join("10.0.0.7", "alice", 200, 60, now_s=130.0)
    assert room.holds(first.number)
    assert not room.holds(second.number)
    told = room.told_to(second.number)
    assert told["you"] == "alice (10.0.0.7)"
    assert told["holding"] is False
    assert told["holder"] == "viewer 1 (127.0.0.1)"
    assert told["since_ms"] == 100_000
    assert told["watching"] == 2


def test_the_control_is_never_taken_from_its_holder() -> None:
    room = Room()
    first = room.join("127.0.0.1", None, 160, 50, now_s=1.0)
    second = room.join("127.0.0.1", None, 160, 50, now_s=2.0)
    assert not room.take(second.number, now_s=3.0)
    room.release(second.number)  # not the holder's to release
    assert room.holds(first.number)


def test_a_released_or_left_control_goes_to_the_next_viewer_who_asks() -> None:
    room = Room()
    first = room.join("127.0.0.1", None, 160, 50, now_s=1.0)
    second = room.join("127.0.0.1", None, 160, 50, now_s=2.0)
    third = room.join("127.0.0.1", None, 160, 50, now_s=3.0)
    room.release(first.number)
    assert room.told_to(second.number)["holder"] is None
    assert room.take(third.number, now_s=5.0)
    assert room.told_to(first.number)["since_ms"] == 5_000
    room.leave(third.number)
    assert not room.holds(third.number)
    assert room.take(second.number, now_s=9.0)
    assert not room.take(first.number, now_s=9.5)


def test_a_viewer_joining_while_others_watch_a_free_control_does_not_take_it() -> None:
    room = Room()
    first = room.join("127.0.0.1", None, 160, 50, now_s=1.0)
    room.release(first.number)
    second = room.join("127.0.0.1", None, 160, 50, now_s=2.0)
    assert room.told_to(second.number)["holder"] is None


def test_the_dashboard_is_as_large_as_the_smallest_viewer_and_never_under_80x24() -> None:
    room = Room()
    assert room.size() == (80, 24)
    wide = room.join("127.0.0.1", None, 200, 60, now_s=1.0)
    narrow = room.join("127.0.0.1", None, 120, 70, now_s=2.0)
    assert room.size() == (120, 60)
    room.resize(narrow.number, 40, 10)
    assert room.size() == (80, 24)
    told = room.told_to(narrow.number)
    assert (told["columns"], told["rows"], told["yours"]) == (80, 24, [40, 10])
    room.leave(narrow.number)
    assert room.size() == (200, 60)
    room.leave(wide.number)
    assert room.size() == (80, 24)
