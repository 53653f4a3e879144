"""What the dashboard's feed saw at each poll that no other line holds, encoded and decoded (pure).

A `probe_poll` line is one poll of the probe by the dashboard's feed: when it polled (`t_s`, the
time its client statistics were taken at), whether the probe was off, held by a sweep or read,
the probe's status then (a row, `slotop.actions.session.status`), how many of the records just
recorded it took, the load steps it took (`events`: a step can be recorded by another reader
before the feed reads it), and how far the probe's own lag moved its numbers over the long and
the short window (`client`: the records keep no per-chunk lag, so this is kept as measured). A
`replica_failed` line is a poll of the replica that failed, with the reason shown as stale. With
these a replay rebuilds the feed's messages through the feed's own code, poll for poll.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from slotop.actions.session.lines import ProbeRows, decode_probe_event, probe_event_line
from slotop.actions.session.status import Columns, status_columns, status_from_row, status_row
from slotop.collectors.probe.lag import NO_CLIENT_ERRORS, ClientError, WindowClientErrors
from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus

ProbeState = Literal["off", "held", "read"]
"""The probe was off, its records were left to someone else (a sweep), or the feed read them."""
PROBE_STATES: tuple[ProbeState, ...] = ("off", "held", "read")


@dataclass(frozen=True, slots=True)
class ProbePoll:
    """One `probe_poll` line read back."""

    t_s: float
    state: ProbeState
    status: ProbeStatus | None
    records: int
    events: tuple[ProbeEvent, ...]
    clients: WindowClientErrors = NO_CLIENT_ERRORS
    """The client errors over the long and the short window, as measured live."""


def _client_json(error: ClientError | None) -> list[Any] | None:
    """A client error as [ttft_pct, itl_pct, ttft_error_s, itl_error_s, lag_p99_s, lag_max_s,
    chunks], seconds to the microsecond (its words show hundredths of a millisecond)."""
    if error is None:
        return None

    def micro(value: float | None) -> float | None:
        return None if value is None else round(value, 6)

    return [
        error.ttft_percentile,
        error.itl_percentile,
        micro(error.ttft_error_s),
        micro(error.itl_error_s),
        micro(error.chunk_lag_p99_s),
        micro(error.chunk_lag_max_s),
        error.chunks,
    ]


def _client(data: Sequence[Any] | None) -> ClientError | None:
    if data is None:
        return None
    ttft_pct, itl_pct, ttft_s, itl_s, lag_p99_s, lag_max_s, chunks = data
    return ClientError(
        float(ttft_pct), float(itl_pct), ttft_s, itl_s, lag_p99_s, lag_max_s, int(chunks)
    )


def probe_poll_line(
    t_s: float,
    state: ProbeState,
    status: ProbeStatus | None = None,
    records: int = 0,
    events: Sequence[ProbeEvent] = (),
    clients: WindowClientErrors = NO_CLIENT_ERRORS,
    *,
    columns: bool = False,
) -> dict[str, Any]:
    """One poll of the probe by the dashboard's feed (see the module docstring); `columns`
    names the status's columns (the first line with a status does)."""
    line: dict[str, Any] = {"kind": "probe_poll", "t_s": t_s, "state": state}
    if clients != NO_CLIENT_ERRORS:
        line["client"] = [_client_json(error) for error in clients]
    if status is not None:
        line["status"] = status_row(status, t_s)
        if columns:
            line["columns"] = status_columns()
    if records:
        line["records"] = records
    if events:
        line["events"] = [
            {k: v for k, v in probe_event_line(event).items() if k != "kind"} for event in events
        ]
    return line


def decode_probe_poll(line: Mapping[str, Any], columns: Columns | None) -> ProbePoll:
    """A `probe_poll` line as the poll it was, its status read under `columns` (the columns the
    recording named last)."""
    state = line["state"]
    if state not in PROBE_STATES:
        raise ValueError(f"unknown probe state {state!r}")
    status = line.get("status")
    if status is not None and columns is None:
        raise ValueError("a status before any line named its columns")
    clients = line.get("client") or (None, None)
    t_s = float(line["t_s"])
    return ProbePoll(
        t_s=t_s,
        state=state,
        status=status_from_row(status, columns, t_s) if status is not None and columns else None,
        records=int(line.get("records", 0)),
        events=tuple(decode_probe_event(event) for event in line.get("events", ())),
        clients=WindowClientErrors(_client(clients[0]), _client(clients[1])),
    )


def replica_failed_line(t_s: float, error: str, failures: int) -> dict[str, Any]:
    """A poll of the replica that failed: the reason the dashboard shows, and how many in a row."""
    return {"kind": "replica_failed", "t_s": t_s, "error": error, "failures": failures}


def records_with_gaps(rows: ProbeRows) -> tuple[ProbeRecord, ...]:
    """A `probe_records` line's requests, each with inter-token gaps as a live record has them.

    Kept gaps are each request's own. Pooled ones are dealt out in turn to the requests that
    ended well, each taking as many as it had (`chunk_count - 1`), so the line's gaps are all
    there, none goes to a failed request, and each request holds a spread of the line's gaps
    (the nearest a window that takes part of a line can come to the gaps its requests had).
    """
    if rows.itl_buckets is None:
        return rows.records
    samples = rows.itl_samples_s()
    wanted = [max(r.chunk_count - 1, 0) if r.ok else 0 for r in rows.records]
    gaps: list[list[float]] = [[] for _ in rows.records]
    turn = [i for i, count in enumerate(wanted) if count > 0]
    taken = 0
    while turn and taken < len(samples):
        still: list[int] = []
        for i in turn:
            if taken == len(samples):
                break
            gaps[i].append(samples[taken])
            taken += 1
            if len(gaps[i]) < wanted[i]:
                still.append(i)
        turn = still
    return tuple(
        dataclasses.replace(record, itl_s=tuple(own)) if own else record
        for record, own in zip(rows.records, gaps, strict=True)
    )


MAX_PENDING = 20_000
"""Records kept waiting for a poll to take them: far more than one poll of the probe brings."""


class FeedTakes:
    """The dashboard feed's probe polls, and the records it took at each, from a recording.

    Every reader's records are recorded (the feed's, and a sweep's while it holds the probe),
    each reader's batch just before its poll line; so a `read` poll of n records took the last n
    recorded since the poll before, and the others were someone else's.
    """

    def __init__(self) -> None:
        self._pending: list[ProbeRecord] = []
        self._columns: Columns | None = None

    def recorded(self, rows: ProbeRows) -> None:
        """A `probe_records` line, its gaps dealt back to its requests."""
        self._pending.extend(records_with_gaps(rows))
        del self._pending[:-MAX_PENDING]  # a recording no feed polled keeps none of them

    def poll(self, line: Mapping[str, Any]) -> tuple[ProbePoll, tuple[ProbeRecord, ...]]:
        """A `probe_poll` line: the poll, and the records it took (none unless it read them)."""
        if "columns" in line:
            self._columns = line["columns"]
        poll = decode_probe_poll(line, self._columns)
        pending, self._pending = self._pending, []
        if poll.state != "read" or not poll.records:
            return poll, ()
        return poll, tuple(pending[len(pending) - poll.records :])
