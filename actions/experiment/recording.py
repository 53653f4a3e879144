"""Rebuild a session's configurations and curves from its recording, line by line as they came.

The first configuration opens at the header's start with unknown dials; the dials the session
learnt (the dashboard's `dials` action, `slotop restart`'s `restart_planned`) fill them in, and
every verified change (`dials`, or `restart` with `dials_now`) opens the next one at the time the
replica began serving with it: the action's `since_s`, else the restart's `up` phase, else the
action's own time. Records and events go through the same builder as live, in file order. A
dashboard's recording says which records its feed took at each probe poll (`probe_poll`): those,
and the load steps the feed took with them, are what the builder gets, as live; records a sweep
drained while it held the probe (its warm-ups among them) never reach the configuration's curve,
whose sweep points the dashboard showed from the sweep's own steps (`sweep_step`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slotop.actions.experiment.builder import ExperimentBuilder
from slotop.actions.experiment.model import DialPairs, dial_pairs
from slotop.actions.replica.spec import Dials
from slotop.actions.session.lines import decode_probe_records
from slotop.actions.session.polls import FeedTakes
from slotop.actions.session.reader import Recording, SessionFormatError, SessionLine
from slotop.collectors.probe.records import ProbeEvent
from slotop.config import slo_from_keys

RESTART_UP_PHASE = "up"
"""The restart phase after which the replica serves with its new dials (the probe resumes)."""
DEFAULT_PERCENTILE = 99.0


def experiment_from_recording(recording: Recording) -> ExperimentBuilder:
    """The configurations and curves of a recorded session, at the recorded SLO's percentiles,
    with its targets as goodput targets (TTFT, and ITL checked through TPOT) as live."""
    slo: Mapping[str, Any] = recording.header.settings.get("slo") or {}
    ttft_ms, itl_ms = slo.get("ttft_ms"), slo.get("itl_ms")
    targets = (
        slo_from_keys({"ttft_ms": float(ttft_ms), "itl_ms": float(itl_ms)}).goodput_targets
        if ttft_ms is not None and itl_ms is not None
        else None
    )
    builder = ExperimentBuilder(
        float(slo.get("ttft_percentile") or DEFAULT_PERCENTILE),
        float(slo.get("itl_percentile") or DEFAULT_PERCENTILE),
        targets,
    )
    builder.open_configuration((), recording.header.started_at_s)
    up_s: float | None = None
    takes = FeedTakes() if any(line.kind == "probe_poll" for line in recording.lines) else None
    for line in recording.of_kind("probe_records", "probe_event", "probe_poll", "action", "event"):
        if takes is not None and line.kind in ("probe_records", "probe_event", "probe_poll"):
            _feed_line(recording, line, takes, builder)
            continue
        if line.kind == "event":
            text = str(line.data.get("text", ""))
            if line.data.get("event") == "restart" and text.startswith(f"{RESTART_UP_PHASE}:"):
                up_s = line.t_s
        elif line.kind == "action":
            opening = _opening(recording, line, up_s)
            if line.data.get("action") in ("restart", "dials"):
                up_s = None
            if opening is not None:
                builder.open_configuration(*opening)
        elif line.kind != "probe_poll":
            decoded = recording.probe_line(line)
            if isinstance(decoded, ProbeEvent):
                builder.add_events((decoded,))
            else:
                pooled = decoded.itl_samples_s() if decoded.itl_buckets is not None else None
                builder.add_records(decoded.records, pooled)
    return builder


def _feed_line(
    recording: Recording, line: SessionLine, takes: FeedTakes, builder: ExperimentBuilder
) -> None:
    """A dashboard's probe line: the builder takes what the feed took, at the poll it took it."""
    try:
        if line.kind == "probe_records":
            takes.recorded(decode_probe_records(line.data, recording.header.started_at_s))
        elif line.kind == "probe_poll":
            poll, records = takes.poll(line.data)
            builder.add_events(poll.events)
            builder.add_records(records)
    except (KeyError, TypeError, ValueError) as exc:
        raise SessionFormatError(
            f"{recording.source}:{line.line_number}: a {line.kind} line does not decode ({exc})"
        ) from None


def _opening(
    recording: Recording, line: SessionLine, up_s: float | None
) -> tuple[DialPairs, float] | None:
    """The dials an action line says the replica runs with, and from when; None if it says none."""
    data = line.data
    try:
        action = data.get("action")
        if action == "dials":
            since = data.get("since_s")
            at_s = float(since) if since is not None else up_s if up_s is not None else line.t_s
            return dial_pairs(Dials.from_json(data["dials"])), at_s
        if action == "restart_planned":
            return dial_pairs(Dials.from_json(data["dials_before"])), line.t_s
        if action == "restart" and data.get("dials_now") is not None:
            at_s = up_s if up_s is not None else line.t_s
            return dial_pairs(Dials.from_json(data["dials_now"])), at_s
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SessionFormatError(
            f"{recording.source}:{line.line_number}: a {data.get('action')} action does not "
            f"say its dials ({exc!r})"
        ) from None
    return None
