"""The terminal modes a browser joining late is put in: the app's last set or reset of each."""

from __future__ import annotations

from slotop.web.modes import TerminalModes


def test_a_newcomer_gets_every_mode_the_app_set_in_the_order_set() -> None:
    modes = TerminalModes()
    modes.feed(b"\x1b[?1049h")
    modes.feed(b"\x1b[?1000h\x1b[?1003h\x1b[?25l")
    modes.feed(b"\x1b[2J plain output, no private mode \x1b[1;1H")
    assert modes.replay() == b"\x1b[?1049h\x1b[?1000h\x1b[?1003h\x1b[?25l"


def test_a_reset_after_a_set_wins_and_moves_last() -> None:
    modes = TerminalModes()
    modes.feed(b"\x1b[?1000h\x1b[?2004h")
    modes.feed(b"text\x1b[?1000lmore")
    assert modes.replay() == b"\x1b[?2004h\x1b[?1000l"


def test_modes_set_together_are_replayed_one_by_one() -> None:
    modes = TerminalModes()
    modes.feed(b"\x1b[?1000;1006h")
    assert modes.replay() == b"\x1b[?1000h\x1b[?1006h"


def test_the_frame_bracket_and_queries_are_not_replayed() -> None:
    modes = TerminalModes()
    modes.feed(b"\x1b[?2026$p")  # a query of synchronised output, not a set
    modes.feed(b"\x1b[?2026h frame \x1b[?2026l")
    assert modes.replay() == b""
