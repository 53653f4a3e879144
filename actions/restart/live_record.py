"""The dashboard's before/after as a recording's `before_after` action, and back (pure).

The dashboard records the panel's state each time it changes, so a report and a replay show what
it showed without measuring anything again: `measuring` when the panel appears after a restart,
`progress` each time more of the new dials' requests have ended, then `measured` (the comparison's
numbers, its table in words and as the text `slotop restart` prints) or `stopped` (the load
changed before enough requests ended), and `hidden` when it goes (`x`, or the next restart).
Every line holds the whole state: the change, the load in words and as numbers, how many of how
many requests, the dials of each side and, once all is in, each side's span (Unix seconds).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from slotop.actions.replica.spec import Dials
from slotop.actions.restart.live import BeforeAfter
from slotop.actions.restart.table import (
    comparison_to_json,
    table_from_json,
    table_text,
    table_to_json,
)

ACTION = "before_after"
STATES = ("measuring", "progress", "measured", "stopped", "hidden")


def state_name(state: BeforeAfter | None, shown: BeforeAfter | None) -> str:
    """What a change of the panel from `shown` to `state` is, as the action's `state` says it."""
    if state is None:
        return "hidden"
    if state.table is not None:
        return "measured"
    if state.stopped:
        return "stopped"
    return "progress" if shown is not None and shown.measuring else "measuring"


def _finite(value: Any) -> Any:
    """The value with every NaN or infinity made null (a recording's lines hold neither)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def before_after_json(state: BeforeAfter | None, shown: BeforeAfter | None) -> dict[str, Any]:
    """The action's data for the panel changing from `shown` to `state` (None: hidden)."""
    name = state_name(state, shown)
    if state is None:
        return {"state": name}
    table = state.table
    data: dict[str, Any] = _finite(
        {
            "state": name,
            "changes": state.changes,
            "load": state.load,
            "mode": state.mode,
            "concurrency": state.concurrency,
            "rate_rps": state.rate_rps,
            "requests": state.requests,
            "wanted": state.wanted,
            "stopped": state.stopped,
            "dials_before": state.dials[0].to_json() if state.dials is not None else None,
            "dials_after": state.dials[1].to_json() if state.dials is not None else None,
            "before_span_s": state.before_span_s,
            "after_span_s": state.after_span_s,
            "settling": state.settling,
            "span_s": state.span_s,
            "wanted_span_s": state.wanted_span_s,
            "comparison": comparison_to_json(state.comparison)
            if state.comparison is not None
            else None,
            "table": table_to_json(table) if table is not None else None,
            "text": table_text(table) if table is not None else None,
        }
    )
    return data


def _number(value: Any) -> float | None:
    return float(value) if value is not None else None


def _span(value: Any) -> tuple[float, float] | None:
    if value is None:
        return None
    start, end = value
    return float(start), float(end)


def before_after_from_json(data: Mapping[str, Any]) -> BeforeAfter | None:
    """The panel's state an action recorded (None: hidden), its table without the comparison.

    Raises ValueError (or KeyError, TypeError) on data no slotop wrote; the caller names the line.
    """
    name = data.get("state")
    if name not in STATES:
        raise ValueError(f"unknown before/after state {name!r}; expected one of {STATES}")
    if name == "hidden":
        return None
    before, after = data.get("dials_before"), data.get("dials_after")
    table = data.get("table")
    mode = data.get("mode")
    concurrency, rate = data.get("concurrency"), data.get("rate_rps")
    return BeforeAfter(
        changes=str(data["changes"]),
        load=str(data["load"]),
        requests=int(data["requests"]),
        wanted=int(data["wanted"]),
        table=table_from_json(table) if isinstance(table, Mapping) else None,
        stopped=str(data.get("stopped") or ""),
        dials=(Dials.from_json(before), Dials.from_json(after))
        if before is not None and after is not None
        else None,
        mode="open" if mode == "open" else "closed" if mode == "closed" else None,
        concurrency=int(concurrency) if concurrency is not None else None,
        rate_rps=float(rate) if rate is not None else None,
        before_span_s=_span(data.get("before_span_s")),
        after_span_s=_span(data.get("after_span_s")),
        settling=bool(data.get("settling")),
        span_s=float(data.get("span_s") or 0.0),
        wanted_span_s=_number(data.get("wanted_span_s")),
    )
