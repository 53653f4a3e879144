"""A recorded sweep as the sweep updates the dashboard showed, read back by the sweep's own code.

The dashboard records the plan a sweep began with (`sweep_started`), each measured step
(`sweep_step`, as `slotop sweep` records it), each update it showed (`sweep_progress`) and how the
sweep ended (`sweep_result`, or `sweep_failed`); each step so far is read back through
`sweep_from_json` with the plan, so its recommendation is the sweep's own. A headless `slotop
sweep` recording has no plan line: its steps are read with the plan of the result that ends them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotop.actions.session.reader import Recording
from slotop.actions.sweep.codec import sweep_from_json
from slotop.actions.sweep.runner import SweepProgress, SweepResult

SweepUpdate = tuple[SweepProgress | None, SweepResult | None, bool]
"""A sweep update as the app takes it: progress, the result so far, whether it still runs."""


class SweepReplay:
    """Follows a recording's sweep actions in order and says what each one showed."""

    def __init__(self, recording: Recording) -> None:
        self._source = recording.source
        self._ahead: list[Mapping[str, Any]] = [
            line.data["sweep"]
            for line in recording.of_kind("action")
            if line.data.get("action") == "sweep_result"
            and isinstance(line.data.get("sweep"), dict)
        ]
        self._plan: Mapping[str, Any] | None = None
        self._started = False
        self._rows: list[Mapping[str, Any]] = []

    def read(self, action: str, data: Mapping[str, Any]) -> SweepUpdate | None:
        """The update a sweep action stands for, None for one the dashboard showed nothing at."""
        if action == "sweep_started":
            self._plan, self._started, self._rows = data["sweep"], True, []
            return None
        if action == "sweep_step":
            self._rows.append(data["step"])
            if self._started:
                return None  # the dashboard's update follows as sweep_progress
            if self._plan is None and self._ahead:
                self._plan = self._ahead[0]
            return (None, self._so_far(), True)
        if action == "sweep_progress":
            progress = data.get("progress")
            shown = SweepProgress(**progress) if progress is not None else None
            return (shown, self._so_far(), True)
        if action == "sweep_result":
            if self._ahead:
                self._ahead.pop(0)
            result = sweep_from_json(data["sweep"], f"{self._source}: a sweep_result")
            self._plan, self._started, self._rows = None, False, []
            return (None, result, False)
        if action == "sweep_failed":
            so_far = self._so_far()
            self._plan, self._started, self._rows = None, False, []
            return (None, so_far, False)
        return None

    def _so_far(self) -> SweepResult | None:
        if self._plan is None or not self._rows:
            return None
        document = {**self._plan, "steps": self._rows, "stop": None}
        return sweep_from_json(document, f"{self._source}: a sweep_step")
