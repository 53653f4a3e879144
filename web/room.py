"""Who watches the served dashboard, who holds its control, and the size every screen can show.

One app is shared by every browser, so one viewer at a time holds the control: its keys reach
the app, everyone else's go nowhere. A browser that opens the dashboard while nobody else watches
takes the control; otherwise a watcher takes it when it is free (the holder released it or left),
never from the holder. The app is as large as the smallest viewer's screen, no smaller than
80×24, so every browser shows all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

MIN_COLUMNS = 80
MIN_ROWS = 24
"""The smallest size the dashboard is laid out for; a smaller browser sees part of it."""


@dataclass(frozen=True, slots=True)
class Viewer:
    """One browser: its number in order of arrival, the name it gave, its address and screen."""

    number: int
    name: str | None
    address: str
    columns: int
    rows: int

    @property
    def label(self) -> str:
        """How other viewers are told of it: `alice (10.0.0.7)`, or `viewer 2 (10.0.0.7)`."""
        return f"{self.name or f'viewer {self.number}'} ({self.address})"


class Room:
    """The viewers of one app, the control, and the size the app should be."""

    def __init__(self) -> None:
        self._viewers: dict[int, Viewer] = {}
        self._arrived = 0
        self._holder: int | None = None
        self._since_s: float | None = None

    def __len__(self) -> int:
        return len(self._viewers)

    def join(self, address: str, name: str | None, columns: int, rows: int, now_s: float) -> Viewer:
        """A browser arrives; it takes the control when it finds nobody else watching."""
        self._arrived += 1
        viewer = Viewer(self._arrived, name, address, columns, rows)
        alone = not self._viewers
        self._viewers[viewer.number] = viewer
        if alone and self._holder is None:
            self._hold(viewer.number, now_s)
        return viewer

    def leave(self, number: int) -> None:
        """A browser goes; the control it held is free."""
        self._viewers.pop(number, None)
        if self._holder == number:
            self._hold(None, None)

    def take(self, number: int, now_s: float) -> bool:
        """A viewer asks for the control: given when free; whether it holds it now."""
        if self._holder is None and number in self._viewers:
            self._hold(number, now_s)
        return self._holder == number

    def release(self, number: int) -> None:
        """The holder lets the control go; anyone else asking changes nothing."""
        if self._holder == number:
            self._hold(None, None)

    def resize(self, number: int, columns: int, rows: int) -> None:
        """A viewer's screen changed size."""
        viewer = self._viewers.get(number)
        if viewer is not None:
            self._viewers[number] = replace(viewer, columns=columns, rows=rows)

    def holds(self, number: int) -> bool:
        """Whether this viewer's keys reach the app."""
        return self._holder is not None and self._holder == number

    def size(self) -> tuple[int, int]:
        """Columns and rows every viewer's screen shows in full (80×24 at least)."""
        viewers = self._viewers.values()
        columns = min((v.columns for v in viewers), default=MIN_COLUMNS)
        rows = min((v.rows for v in viewers), default=MIN_ROWS)
        return max(columns, MIN_COLUMNS), max(rows, MIN_ROWS)

    def told_to(self, number: int) -> dict[str, Any]:
        """What a viewer's page shows of the room: who it is, who holds the control and since
        when (Unix milliseconds), how many watch and how large the dashboard is."""
        you = self._viewers.get(number)
        holder = self._viewers.get(self._holder) if self._holder is not None else None
        columns, rows = self.size()
        return {
            "you": you.label if you is not None else None,
            "holding": self.holds(number),
            "holder": holder.label if holder is not None else None,
            "since_ms": round(self._since_s * 1000) if self._since_s is not None else None,
            "watching": len(self._viewers),
            "columns": columns,
            "rows": rows,
            "yours": [you.columns, you.rows] if you is not None else None,
        }

    def numbers(self) -> list[int]:
        """Every viewer's number, in order of arrival."""
        return list(self._viewers)

    def _hold(self, number: int | None, now_s: float | None) -> None:
        self._holder, self._since_s = number, now_s
