"""A bounded ring of timestamped values, so that history never grows with session length."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

_T = TypeVar("_T")


class History(Generic[_T]):
    """The newest ``capacity`` (time, value) pairs, oldest first; older ones fall off."""

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"a history needs room for at least one value, not {capacity}")
        self.capacity = capacity
        self._items: deque[tuple[float, _T]] = deque(maxlen=capacity)

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[float, _T]]:
        return iter(tuple(self._items))

    def append(self, time_s: float, value: _T) -> None:
        """Add a value; the oldest falls off when the ring is full."""
        self._items.append((time_s, value))

    def latest(self) -> tuple[float, _T] | None:
        """Return the newest (time, value), None when empty."""
        return self._items[-1] if self._items else None

    def after(self, value: _T | None) -> tuple[list[_T], bool]:
        """The values appended after `value` (the same object), oldest first, and whether it was
        still here; every value, and False, when it was not (or is None)."""
        newer: list[_T] = []
        for _, item in reversed(self._items):
            if item is value:
                newer.reverse()
                return newer, True
            newer.append(item)
        newer.reverse()
        return newer, False

    def since(self, time_s: float) -> list[tuple[float, _T]]:
        """Return the pairs taken at or after ``time_s``, oldest first."""
        return [item for item in tuple(self._items) if item[0] >= time_s]

    def series(self, value_of: Callable[[_T], float | None]) -> list[tuple[float, float | None]]:
        """Project every value to a number (None where missing), for a sparkline or chart."""
        return [(time_s, value_of(value)) for time_s, value in tuple(self._items)]

    def clear(self) -> None:
        """Forget every value."""
        self._items.clear()
