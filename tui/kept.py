"""The dashboard's containers and screen, each answering the compositor with its last lines while
none of them changed (`KeptLines`, tui/textual_internals.py), as its panes do.

A Textual class comes first in each one's bases: Textual takes a widget's default styles along the
first base only (a scrolling body without its scrollbar otherwise).
"""

from __future__ import annotations

from typing import Any

from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen

from slotop.tui.textual_internals import KeptLines


class Body(VerticalScroll, KeptLines):
    """The dashboard's scrolling body."""


class Row(Horizontal, KeptLines):
    """A row of panes (a column of them on a narrow terminal)."""


class Stack(Vertical, KeptLines):
    """Panes stacked inside a row."""


class KeptScreen(Screen[Any], KeptLines):
    """The dashboard's screen (its background, behind every pane)."""
