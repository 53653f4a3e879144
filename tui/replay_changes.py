"""A recorded restart's before/after, gathered again by the dashboard's own before/after code.

The restart flow feeds `LiveBeforeAfter` with the restart's plan when it begins, its result when
it ends, the records and load steps the feed took, and the newest fresh snapshot at each poll,
and shows its state whenever it changed; this does the same from the recording's lines, in
their order. The table's work runs here at once, and is shown where the dashboard showed it (the
`before_after` action it recorded then).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slotop.actions.restart.apply import RestartPlan
from slotop.actions.restart.live import BeforeAfter, Built, LiveBeforeAfter
from slotop.actions.restart.recorded import plan_from_json, result_from_json
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus
from slotop.collectors.snapshot import Snapshot
from slotop.config import Settings


@dataclass(frozen=True, slots=True)
class ChangeShown:
    """The before/after shown from here on, and which restart it belongs to (from 1)."""

    state: BeforeAfter | None
    restart: int


class ChangeReplay:
    """The before/after of a recording's restarts, as the dashboard's flow built it."""

    def __init__(self, settings: Settings, url: str) -> None:
        self._before_after = LiveBeforeAfter(settings)
        self._url = url
        self._fresh: Snapshot | None = None
        self._plan: RestartPlan | None = None
        self._done: Built | None = None
        self._shown: BeforeAfter | None = None
        self._restarts = 0

    def polled(self, snapshot: Snapshot | None) -> ChangeShown | None:
        """A poll of the replica: its snapshot, or None when it failed."""
        self._fresh = snapshot
        return self._refresh()

    def took(
        self,
        records: Sequence[ProbeRecord],
        events: Sequence[ProbeEvent],
        status: ProbeStatus | None,
    ) -> ChangeShown | None:
        """Records and load steps the feed took, with the probe's status then."""
        self._before_after.add(records, events, status)
        return self._refresh()

    def began(self, data: Mapping[str, Any], at_s: float) -> ChangeShown | None:
        """A `restart_planned` action: the dashboard's restart began."""
        if "changes" not in data:
            return None  # slotop restart's, which the dashboard never showed
        self._plan = plan_from_json(data, self._url)
        self._restarts += 1
        self._before_after.began(self._plan, at_s, self._fresh)
        return self._refresh()

    def ended(self, data: Mapping[str, Any]) -> ChangeShown | None:
        """A `restart` action: how the dashboard's restart ended."""
        if self._plan is None or "events" not in data:
            return None
        self._before_after.ended(result_from_json(data, self._plan))
        return self._refresh()

    def built(self) -> ChangeShown | None:
        """A `before_after` action: the dashboard showed the table here."""
        done, self._done = self._done, None
        if done is None:
            return None
        self._before_after.built(done)
        return self._refresh()

    def _refresh(self) -> ChangeShown | None:
        state = self._before_after.state(self._fresh)
        job = self._before_after.build()
        if job is not None:
            self._done = job()
        if state == self._shown:
            return None
        self._shown = state
        return ChangeShown(state, self._restarts)
