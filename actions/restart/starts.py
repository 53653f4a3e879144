"""How far one configuration's steady level moves from one start of the replica to the next.

A before/after's band (`noise`) holds how far a side's numbers move within one start: which
requests happened to be slow, where the span's edges cut the stream. A restart adds a term the
band cannot see from two sides: the replica that comes back is another process, and on a real
engine its level may differ by itself (where its threads landed, what memory it got, which kernels
its warm-up picked). On the vLLM CPU replica one no-op restart in three came back 20 to 33% faster
or slower; the simulated replica has no such term. Two sides, one start each, say nothing of it.

It is measured the only way it can be: the same dials started several times, each start's steady
level measured as a side is (`slotop restart --starts N`). For each row, with n starts giving
levels x₁…xₙ and standard errors se₁…seₙ from their own batches, the spread between starts is
what the levels vary beyond their sampling error (the one-way random-effects estimate):

    σ²_between = max(0, var(x) − mean(se²)),  kept relative to the rows' mean level.

A later before/after on that replica adds t·σ_rel·√(before² + after²) to its band in quadrature,
t the 97.5% point for n − 1 degrees of freedom (few starts say little of a spread, so the term is
wide until more are measured). The spread is kept in the replica's state file beside its last
downtime, with the starts, load and dials it was measured at.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slotop.actions.replica.spec import LaunchError, read_entry, write_entry
from slotop.collectors.probe.resample import t_975

MIN_STARTS = 3
"""A spread needs this many starts: two leave one degree of freedom (t = 12.7), no use to a band."""

Levels = Mapping[str, tuple[float, float | None]]
"""One start's measured rows: key → (value, its standard error; None where unknown)."""


@dataclass(frozen=True, slots=True)
class StartSpread:
    """The replica's start-to-start spread per row (standard deviation over the mean level),
    from `starts` starts of one configuration at one load."""

    relative: Mapping[str, float]
    starts: int
    concurrency: int | None = None
    flags: tuple[str, ...] = ()
    measured_at_unix_s: float = 0.0
    levels: tuple[Mapping[str, float], ...] = field(default=())
    """Each start's value per row, kept so the measurement can be read back."""

    def half_width(self, key: str, before: float, after: float) -> float | None:
        """The start-to-start part of a difference's 95% band; None where this row has none."""
        relative = self.relative.get(key)
        if relative is None or self.starts < MIN_STARTS:
            return None
        return t_975(self.starts - 1) * relative * math.hypot(before, after)

    def words(self) -> str:
        """Where the spread came from, in a line."""
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(self.measured_at_unix_s))
        load = f" at {self.concurrency} in flight" if self.concurrency else ""
        dials = f", {' '.join(self.flags)}" if self.flags else ""
        return f"{self.starts} starts{load}{dials}, measured {when}"

    def to_json(self) -> dict[str, Any]:
        return {
            "relative": dict(self.relative),
            "starts": self.starts,
            "concurrency": self.concurrency,
            "flags": list(self.flags),
            "measured_at_unix_s": self.measured_at_unix_s,
            "levels": [dict(level) for level in self.levels],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StartSpread:
        """The spread back from `to_json`'s mapping; ValueError names what is wrong."""
        try:
            relative = {str(k): float(v) for k, v in dict(data["relative"]).items()}
            starts = int(data["starts"])
            concurrency = data.get("concurrency")
            return cls(
                relative=relative,
                starts=starts,
                concurrency=int(concurrency) if concurrency is not None else None,
                flags=tuple(str(flag) for flag in data.get("flags") or ()),
                measured_at_unix_s=float(data.get("measured_at_unix_s") or 0.0),
                levels=tuple(
                    {str(k): float(v) for k, v in dict(level).items()}
                    for level in data.get("levels") or ()
                ),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"a start spread that cannot be read ({exc!r})") from None


def between_starts(values: Sequence[float], errors: Sequence[float]) -> float:
    """The standard deviation between starts beyond their sampling error: √max(0, var − mean se²)."""
    if len(values) < 2 or len(errors) != len(values):
        raise ValueError(f"need two starts or more with an error each, got {len(values)}")
    spread = float(np.var(np.asarray(values, dtype=float), ddof=1))
    sampling = float(np.mean(np.square(np.asarray(errors, dtype=float))))
    return math.sqrt(max(0.0, spread - sampling))


def estimate_start_spread(
    starts: Sequence[Levels],
    *,
    concurrency: int | None = None,
    flags: tuple[str, ...] = (),
    at_unix_s: float | None = None,
) -> StartSpread:
    """The spread from each start's levels; a row any start lacks (or whose mean is 0) has none."""
    if len(starts) < MIN_STARTS:
        raise ValueError(f"a start spread needs {MIN_STARTS} starts or more, got {len(starts)}")
    relative: dict[str, float] = {}
    for key in starts[0]:
        pairs = [start.get(key) for start in starts]
        if any(pair is None or pair[1] is None for pair in pairs):
            continue
        values = [pair[0] for pair in pairs if pair is not None]
        errors = [pair[1] for pair in pairs if pair is not None and pair[1] is not None]
        mean = float(np.mean(values))
        if mean == 0:
            continue
        relative[key] = between_starts(values, errors) / abs(mean)
    return StartSpread(
        relative=relative,
        starts=len(starts),
        concurrency=concurrency,
        flags=flags,
        measured_at_unix_s=time.time() if at_unix_s is None else at_unix_s,
        levels=tuple({key: pair[0] for key, pair in start.items()} for start in starts),
    )


def kept_start_spread(state_path: Path) -> StartSpread | None:
    """The spread the replica's state file keeps, None when none was measured."""
    data = read_entry(state_path, "start_spread")
    if data is None:
        return None
    try:
        return StartSpread.from_json(data)
    except ValueError as exc:
        raise LaunchError(
            f"the replica state file {state_path} holds {exc}; measure it again with "
            "`slotop restart --starts 4 --concurrency N`, or delete its start_spread entry"
        ) from None


def start_spread_or_said(state_path: Path, say: Callable[[str], object]) -> StartSpread | None:
    """The spread the state file keeps; a damaged one is said, and what asked goes without."""
    try:
        return kept_start_spread(state_path)
    except LaunchError as exc:
        say(str(exc))
        return None


def keep_start_spread(state_path: Path, spread: StartSpread | None) -> None:
    """Keep the spread in the replica's state file (None forgets it)."""
    write_entry(state_path, "start_spread", spread.to_json() if spread is not None else None)
