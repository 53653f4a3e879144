"""Each replica's last good figures across polls, so a failed or partial poll shows stale values.

A poll that fails whole (the server is down or slow) marks every known replica stale with the
reason; a query that fails alone marks only the figures it feeds; a replica missing from an
answer stays, stale, until it has been missing for `forget_after_s`. Stale figures keep the last
good values; a figure never read stays None.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from slotop.collectors.fleet import ALL_FIELDS, FleetPoll, ReplicaFigures, ReplicaKey

DEFAULT_FORGET_AFTER_S = 300.0


@dataclass(frozen=True, slots=True)
class TrackedReplica:
    """A replica's figures (the last good ones where this poll failed) and what is stale, why.

    `stale` pairs each figure that shows an old value (or none) with the reason; empty when the
    whole row is fresh. `last_good_at_s` is when a poll last read any of its figures.
    """

    figures: ReplicaFigures
    stale: tuple[tuple[str, str], ...] = ()
    last_good_at_s: float | None = None

    @property
    def stale_reason(self) -> str | None:
        """Why the row is stale (the first reason), None when it is fresh."""
        return self.stale[0][1] if self.stale else None


@dataclass(frozen=True, slots=True)
class FleetState:
    """Every tracked replica after a poll, and what the source said.

    `error` is why the whole poll failed (None when it answered); `warnings` are the server's.
    """

    taken_at_s: float
    replicas: tuple[TrackedReplica, ...]
    source: str
    error: str | None = None
    warnings: tuple[str, ...] = ()
    query_s: float | None = None
    queries: int = 0
    window_s: float | None = None


def _carried(
    fresh: ReplicaFigures, before: TrackedReplica | None, reasons: dict[str, str]
) -> ReplicaFigures:
    """Fresh figures with each unread one taken from the replica's last tracked figures."""
    if before is None or not reasons:
        return fresh
    old = before.figures
    kept = {name: getattr(old, name) for name in reasons if getattr(fresh, name) is None}
    model = fresh.model or old.model
    engine = fresh.engine or old.engine
    return dataclasses.replace(fresh, model=model, engine=engine, **kept)


class FleetTracker:
    """Folds polls into a FleetState, keeping last good values where a poll could not read them."""

    def __init__(self, *, forget_after_s: float = DEFAULT_FORGET_AFTER_S) -> None:
        self.forget_after_s = forget_after_s
        self._known: dict[ReplicaKey, TrackedReplica] = {}
        self._source = ""
        self._window_s: float | None = None

    def update(self, poll: FleetPoll) -> FleetState:
        """Take a poll that answered (maybe partly); return every replica's state."""
        self._source = poll.source
        seen: set[ReplicaKey] = set()
        for fresh in poll.replicas:
            seen.add(fresh.key)
            before = self._known.get(fresh.key)
            reasons = dict(fresh.unread)
            read_any = len(reasons) < len(ALL_FIELDS)
            self._known[fresh.key] = TrackedReplica(
                figures=_carried(fresh, before, reasons),
                stale=tuple((name, reasons[name]) for name in ALL_FIELDS if name in reasons),
                last_good_at_s=poll.taken_at_s if read_any else _last_good(before),
            )
            if fresh.window_s is not None:
                self._window_s = fresh.window_s
        for key, tracked in list(self._known.items()):
            if key in seen:
                continue
            since = tracked.last_good_at_s
            if since is not None and poll.taken_at_s - since > self.forget_after_s:
                del self._known[key]
                continue
            self._known[key] = dataclasses.replace(
                tracked, stale=tuple((name, _ABSENT) for name in ALL_FIELDS)
            )
        return self._state(
            poll.taken_at_s,
            error=None,
            warnings=poll.warnings,
            query_s=poll.query_s,
            queries=poll.queries,
        )

    def failed(self, reason: str, at_s: float, source: str | None = None) -> FleetState:
        """A poll that failed whole: every known replica keeps its values, stale with `reason`."""
        if source is not None:
            self._source = source
        for key, tracked in self._known.items():
            self._known[key] = dataclasses.replace(
                tracked, stale=tuple((name, reason) for name in ALL_FIELDS)
            )
        return self._state(at_s, error=reason)

    def _state(
        self,
        at_s: float,
        *,
        error: str | None,
        warnings: tuple[str, ...] = (),
        query_s: float | None = None,
        queries: int = 0,
    ) -> FleetState:
        return FleetState(
            taken_at_s=at_s,
            replicas=tuple(self._known.values()),
            source=self._source,
            error=error,
            warnings=warnings,
            query_s=query_s,
            queries=queries,
            window_s=self._window_s,
        )


_ABSENT = "absent from the latest answer (no sample within the window)"


def _last_good(tracked: TrackedReplica | None) -> float | None:
    return tracked.last_good_at_s if tracked is not None else None
