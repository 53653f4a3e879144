"""A recorded restart's before/after panel, as the dashboard showed it.

The dashboard records the panel each time it changes (`before_after` actions, `live_record`):
appearing after a restart, each request more, measured with its table, stopped, hidden. A replay
shows each recorded state where it was recorded, so the panel shows what it showed then, its
table in the very words, without measuring anything again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from slotop.actions.restart.live import BeforeAfter
from slotop.actions.restart.live_record import before_after_from_json


@dataclass(frozen=True, slots=True)
class ChangeShown:
    """The before/after shown from here on, and which restart's panel it is (from 1)."""

    state: BeforeAfter | None
    restart: int


class ChangeReplay:
    """Follows a recording's `before_after` actions and says what the panel showed at each."""

    def __init__(self) -> None:
        self._panels = 0

    def read(self, data: Mapping[str, Any]) -> ChangeShown:
        """The panel a `before_after` action recorded (ValueError for one no slotop wrote)."""
        state = before_after_from_json(data)
        if data.get("state") == "measuring":
            self._panels += 1  # a restart's panel appears
        return ChangeShown(state, self._panels)
