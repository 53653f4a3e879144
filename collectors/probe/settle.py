"""When the probe's load has settled after it rose: every measurement of a steady load starts there.

A closed loop that adds streams (a start, `+`, a resume after a restart, a sweep step) opens each
new stream with a request cut to a random share of its length (`ProbeRecord.opening`), so that
streams started together run out of step from their second request on. The load is settled once
two generations have passed: the openings have ended (the streams are out of step), and so has
every request that was already in flight when the last opening ended (each of those was sent
into the mix of a load still on its way, of young and cut-short requests; a replica just started
also meets its cold caches with them). From then on, everything in flight was sent into the
steady load: a side of a before/after or a sweep step counts the requests sent from then on, and
never an opening.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from slotop.collectors.probe.records import ProbeRecord, ProbeStatus


def openings_end_s(records: Iterable[ProbeRecord], since_s: float, until_s: float) -> float:
    """The end of the last opening request that ended in [since_s, until_s], else `since_s`."""
    return max(
        (r.done_at_s for r in records if r.opening and since_s <= r.done_at_s <= until_s),
        default=since_s,
    )


def _second_generation_end_s(
    records: Sequence[ProbeRecord], opened_s: float, since_s: float, until_s: float
) -> float:
    """The end of the last request in flight at `opened_s` that ended in [since_s, until_s]."""
    return max(
        (
            r.done_at_s
            for r in records
            if r.sent_at_s <= opened_s and since_s <= r.done_at_s <= until_s
        ),
        default=opened_s,
    )


def settled_by(records: Sequence[ProbeRecord], since_s: float, until_s: float) -> float:
    """When a load step that ran from `since_s` to `until_s` settled: `since_s` if it opened no
    stream, `until_s` if an opening outlived it (it never settled). Other requests still
    streaming at `until_s` were cut by what came next: they do not hold the step back."""
    if any(r.opening and since_s <= r.sent_at_s <= until_s < r.done_at_s for r in records):
        return until_s  # an opening outlived the step: it never settled
    opened = openings_end_s(records, since_s, until_s)
    if opened == since_s:
        return since_s
    return _second_generation_end_s(records, opened, since_s, until_s)


def settled_at(
    records: Sequence[ProbeRecord], since_s: float, status: ProbeStatus | None
) -> float | None:
    """When the load running since `since_s` settled; None while it settles (an opening, or a
    request sent before the last opening ended, still streams), or while the probe has said
    nothing since `since_s`.

    A status counts openings still streaming and comes after the records of every request that
    ended before it, so once it says none of them streams, their ends are all in `records`.
    """
    if status is None or status.at_s < since_s or status.openings_streaming:
        return None
    opened = openings_end_s(records, since_s, status.at_s)
    if opened == since_s:
        return since_s
    if any(sent_s <= opened for sent_s in status.streaming_sent_at_s):
        return None
    return _second_generation_end_s(records, opened, since_s, status.at_s)


def steady(records: Iterable[ProbeRecord], since_s: float) -> list[ProbeRecord]:
    """The requests of a settled load: sent at or after `since_s` (when it settled), no openings."""
    return [r for r in records if r.sent_at_s >= since_s and not r.opening]
