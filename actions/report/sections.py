"""The report's plain sections: what was recorded, the replica, the SLO, and the events (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from slotop import fmt
from slotop.actions.report.markdown import offset, table, utc
from slotop.actions.report.timeline import action_words
from slotop.actions.session.reader import Recording, SessionLine
from slotop.collectors.engines import engine_label
from slotop.collectors.snapshot import Snapshot
from slotop.config import SLO_KEYS, slo_from_keys
from slotop.slo import Slo


def summary_section(recording: Recording, path_words: str) -> list[str]:
    """The title, where the recording came from, how long it ran, and what the reader noticed."""
    header = recording.header
    span = recording.last_t_s - header.started_at_s
    ending = (
        "slotop closed the recording itself"
        if recording.ended
        else "the recording has no end line: the process was killed, or still runs"
    )
    lines = [
        "# slotop session report",
        "",
        f"Recorded by `slotop {header.command}` (slotop {header.slotop_version or '?'}, "
        f"schema {header.schema}) from {utc(header.started_at_s)} for "
        f"{fmt.duration(span)}; {ending}.",
        "",
        f"Recording: `{path_words}`",
        "",
    ]
    if recording.notes:
        lines += ["Notes from reading it:", ""]
        lines += [f"- {note}" for note in recording.notes]
        lines.append("")
    return lines


def _number(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def slo_targets(recording: Recording) -> Slo:
    """The recorded settings' `[slo]` (a key it lacks keeps its default)."""
    slo: Mapping[str, Any] = recording.header.settings.get("slo") or {}
    numbers = {key: value for key in SLO_KEYS if (value := _number(slo, key)) is not None}
    return slo_from_keys(numbers)


def slo_section(recording: Recording) -> list[str]:
    """The targets the session held the replica to."""
    targets = slo_targets(recording)
    ttft_name, itl_name = targets.percentile_names
    return [
        "## SLO",
        "",
        f"TTFT {ttft_name} ≤ {fmt.millis(targets.ttft_s, 'g', ' ms')} and ITL {itl_name} ≤ "
        f"{fmt.millis(targets.itl_s, 'g', ' ms')} (the recorded settings' `[slo]`); throughput is what is "
        "maximised under both. A point meets the SLO when both client-side values are at or "
        "under their targets and its failed requests leave the percentiles reachable.",
        "",
    ]


def _kv_words(snapshot: Snapshot) -> str:
    kv = snapshot.kv
    if kv.blocks_total is None and kv.cache_dtype is None:
        return fmt.NA
    seqs = f", {fmt.number(kv.max_concurrency, 1)} sequences at max context"
    return (
        f"{kv.cache_dtype or '?'}: {fmt.number(kv.blocks_total)} blocks of "
        f"{kv.block_size_tokens or '?'} tokens ({fmt.number(kv.size_tokens)} tokens)"
        + (seqs if kv.max_concurrency is not None else "")
    )


def replica_section(
    recording: Recording, first: Snapshot | None, last: Snapshot | None
) -> list[str]:
    """Which replica: its URL, model, vLLM version and KV cache, as the monitor read them."""
    url = str(recording.header.replica.get("url") or fmt.NA)
    rows: list[tuple[str, str]] = [("URL", url)]
    if first is None:
        rows.append(("readings", "none recorded: the replica was never polled"))
    else:
        info = first.replica
        served = ", ".join(info.served_models) or fmt.NA
        rows += [
            ("model", info.model_name or fmt.NA),
            ("served models", served),
            (engine_label(info.engine), info.version or fmt.NA),
            ("engine", info.engine_generation or fmt.NA),
            ("KV cache at the start", _kv_words(first)),
        ]
        if last is not None and _kv_words(last) != _kv_words(first):
            rows.append(("KV cache at the end", _kv_words(last)))
    launch: Mapping[str, Any] = recording.header.settings.get("launch") or {}
    command = " ".join(str(part) for part in launch.get("command") or ())
    if command:
        rows.append(("[launch] command", command))
    return ["## Replica", "", *table(("", ""), rows, "ll"), ""]


def _probe_words(data: Mapping[str, Any]) -> str:
    kind = str(data.get("event", "?")).replace("_", " ")
    if data.get("mode") == "closed" and data.get("concurrency") is not None:
        load = f"{data['concurrency']} in flight"
    elif data.get("mode") == "open" and data.get("rate_rps") is not None:
        load = f"{data['rate_rps']:g} requests/s"
    else:
        load = ""
    detail = str(data.get("detail") or "")
    return "; ".join(part for part in (f"probe {kind}", load, detail) if part)


def event_rows(recording: Recording) -> list[tuple[float, str, str]]:
    """Every entry of the session's timeline as (time, kind, words), in time order."""
    rows: list[tuple[float, str, str]] = []
    for line in recording.lines:
        words = _event_words(line)
        if words is not None:
            rows.append((line.t_s, *words))
    rows.sort(key=lambda row: row[0])
    return rows


def _event_words(line: SessionLine) -> tuple[str, str] | None:
    data = line.data
    if line.kind == "event":
        return str(data.get("event", "?")), str(data.get("text", ""))
    if line.kind == "action":
        if data.get("action") == "before_after" and data.get("state") == "progress":
            return None  # the panel's count of requests; its start and its end are listed
        return "action", action_words(data)
    if line.kind == "probe_event":
        return "load", _probe_words(data)
    if line.kind == "end":
        return "end", f"recording closed ({data.get('reason', '?')})"
    return None


def events_section(recording: Recording, most: int = 500) -> list[str]:
    """The timeline as a table (the newest `most` when there are more)."""
    rows = event_rows(recording)
    start = recording.header.started_at_s
    lines = ["## Events", ""]
    if not rows:
        return [*lines, "No events, actions or load changes were recorded.", ""]
    if len(rows) > most:
        lines += [f"The first {len(rows) - most} of {len(rows)} entries are left out.", ""]
        rows = rows[-most:]
    shown = [(offset(t, start), kind, words) for t, kind, words in rows]
    return [*lines, *table(("time", "kind", "what"), shown, "rll"), ""]


def files_section(names: Sequence[tuple[str, str]]) -> list[str]:
    """What else the folder holds, each file in a few words."""
    lines = ["## Files", ""]
    lines += [f"- [`{name}`]({name}): {words}" for name, words in names]
    return [*lines, ""]
