"""Read a recorded tune back: its plan, the replica's original dials, its budget, every trial and
decision so far, and a last trial a cancel cut short (what `slotop tune --resume` and the report's
tune section read).

A tune records `tune_started` (the original dials, the budget, the SLO), a `tune_decision` per
decision, a `tune_trial` per configuration measured (its sweep in `slotop sweep --json`'s form)
and `tune_result` at its end. A resumed tune's recording opens with the trials it took over.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slotop.actions.replica.spec import Dials
from slotop.actions.session.reader import Recording, read_recording
from slotop.actions.tune.capacity import Capacity
from slotop.actions.tune.model import Decision, Trial, TuneError
from slotop.actions.tune.runner import TuneState


@dataclass(frozen=True, slots=True)
class RecordedTune:
    """A tune as its recording holds it; `result` is its `tune_result` data (None: cut short)."""

    url: str | None
    original: Dials
    capacity: Capacity | None
    state: TuneState
    result: Mapping[str, Any] | None
    started_at_s: float


def recorded_tune(recording: Recording) -> RecordedTune | None:
    """The tune a recording holds, None when it holds none (it was not `slotop tune`'s)."""
    started: Mapping[str, Any] | None = None
    started_at_s = recording.header.started_at_s
    trials: dict[int, Trial] = {}
    decisions: list[Decision] = []
    result: Mapping[str, Any] | None = None
    for line in recording.of_kind("action"):
        data, action = line.data, line.data.get("action")
        where = f"{recording.source}:{line.line_number}"
        if action == "tune_started":
            started, started_at_s = data, line.t_s
        elif action == "tune_trial" and isinstance(data.get("trial"), Mapping):
            trial = Trial.from_json(data["trial"], where)
            trials[trial.number] = trial  # a trial resumed and measured whole replaces its cut
        elif action == "tune_decision" and isinstance(data.get("decision"), Mapping):
            decisions.append(Decision.from_json(data["decision"], where))
        elif action == "tune_result" and isinstance(data.get("tune"), Mapping):
            result = data["tune"]
    if started is None:
        return None
    try:
        original = Dials.from_json(started["original_dials"])
        raw = started.get("capacity")
        capacity = Capacity.from_json(raw) if isinstance(raw, Mapping) else None
    except (KeyError, TypeError, ValueError) as exc:
        raise TuneError(
            f"{recording.source}: its tune_started line does not read back ({exc})"
        ) from None
    ordered = tuple(trials[number] for number in sorted(trials))
    url = started.get("url")
    return RecordedTune(
        url=str(url) if isinstance(url, str) else None,
        original=original,
        capacity=capacity,
        state=TuneState(ordered, tuple(decisions)),
        result=result,
        started_at_s=started_at_s,
    )


def read_tune(path: Path) -> RecordedTune:
    """The tune recorded in `path`; TuneError naming the file when it holds none."""
    recorded = recorded_tune(read_recording(path))
    if recorded is None:
        raise TuneError(
            f"{path}: holds no tune (no tune_started action); give the recording `slotop tune` "
            "wrote (it names it at its start)"
        )
    if recorded.result is not None and not recorded.result.get("resumable"):
        raise TuneError(
            f"{path}: that tune ended whole ({recorded.result.get('stop')}); --resume goes on "
            "with one an interrupt or the time budget cut short"
        )
    return recorded
