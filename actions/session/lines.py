"""The session format: the header, and every line but readings, encoded and decoded (pure).

Times are Unix seconds (`t_s`) except in probe rows, where they are seconds after the header's
`started_at_s`, rounded to the microsecond. Keys carry their unit; null is a missing value; no
line holds NaN. Secrets never reach a line: the settings drop the API key, keep only the names of
`[launch] env`, hide the value of any `--api-key` in a command, and strip user info from URLs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from slotop import __version__, fmt
from slotop.collectors.gpu.reader import GpuDevice, GpuProcess, GpuSnapshot
from slotop.collectors.probe.records import ErrorClass, EventKind, ProbeEvent, ProbeRecord
from slotop.config import Settings, slo_keys
from slotop.redact import REDACTED, redact_argv, shown_url

SCHEMA_NAME = "slotop.session"
SCHEMA_VERSION = 1
SCHEMA = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"
READABLE_VERSIONS: tuple[int, ...] = (1,)
"""Schema versions this slotop reads; an older one stays here, with its decoder, while it can."""

ITL_BUCKET_RATIO = 1.01
"""Pooled inter-token gaps fall in log buckets: bucket i holds gaps in [1.01^i, 1.01^(i+1)) µs.
A line's `itl_buckets` is a flat list of (index step, count): each bucket's index is the one
before plus its step (the first counts from 0), so close buckets cost a digit or two."""

PROBE_COLUMNS: tuple[str, ...] = (
    "request_id",
    "step",
    "sent_at_s",
    "done_at_s",
    "in_flight_at_send",
    "planned_prompt_tokens",
    "planned_output_tokens",
    "ttft_s",
    "e2e_s",
    "chunk_count",
    "prompt_tokens",
    "output_tokens",
    "finish_reason",
    "http_status",
    "error",
    "error_detail",
    "itl_s",
    "stream",
    "opening",
)
"""A probe row's values, in order; `sent_at_s`/`done_at_s` are after the session's start. A row
may stop early: the columns it leaves off hold their defaults (PROBE_DEFAULTS), so the rows of an
older slotop, which end at `itl_s`, read as open-loop requests that opened nothing."""
PROBE_DEFAULTS: tuple[Any, ...] = (None, "", None, None, False)
"""The defaults of the last columns (error, error_detail, itl_s, stream, opening), which rows
leave off."""


def _micro(value: float | None) -> float | None:
    present = fmt.finite(value)
    return None if present is None else round(present, 6)


def settings_json(settings: Settings) -> dict[str, Any]:
    """Every setting as JSON-ready data, secrets left out (see the module docstring)."""
    data = dataclasses.asdict(settings)
    data["slo"] = slo_keys(settings.slo)
    data["replica"].pop("api_key", None)
    data["replica"]["url"] = shown_url(settings.replica.url)
    launch = data["launch"]
    launch["env"] = {name: REDACTED for name, _ in settings.launch.env}
    launch["command"] = redact_argv(settings.launch.command)
    launch["restart_command"] = redact_argv(settings.launch.restart_command)
    return data


def header_line(
    *,
    command: str,
    settings: Settings,
    started_at_s: float,
    replica: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The first line: schema, who wrote it, when, which command, the settings and the replica."""
    return {
        "schema": SCHEMA,
        "slotop_version": __version__,
        "started_at_s": started_at_s,
        "command": command,
        "settings": settings_json(settings),
        "replica": {"url": shown_url(settings.replica.url), **(replica or {})},
        "probe_columns": list(PROBE_COLUMNS),
        "itl_bucket_ratio": ITL_BUCKET_RATIO,
    }


def event_line(t_s: float, event: str, text: str, **data: Any) -> dict[str, Any]:
    """A timeline entry (`event` says what kind: probe, restart, down, up, note, ...)."""
    return {"kind": "event", "t_s": t_s, "event": event, "text": text, **data}


def action_line(t_s: float, action: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """An action and what came of it: a restart (dials before and after), a sweep step, ..."""
    return {"kind": "action", "t_s": t_s, "action": action, **data}


def itl_bucket(gap_s: float) -> int | None:
    """The log bucket of one gap; None for a gap under a microsecond (counted apart)."""
    micros = gap_s * 1e6
    if not micros >= 1.0:
        return None
    return math.floor(math.log(micros) / math.log(ITL_BUCKET_RATIO))


def itl_bucket_value_s(index: int) -> float:
    """The value a bucket stands for: its geometric middle, in seconds."""
    return float(ITL_BUCKET_RATIO ** (index + 0.5)) / 1e6


def _row(record: ProbeRecord, started_at_s: float, keep_gaps: bool) -> list[Any]:
    row = [
        record.request_id,
        record.step,
        _micro(record.sent_at_s - started_at_s),
        _micro(record.done_at_s - started_at_s),
        record.in_flight_at_send,
        record.planned_prompt_tokens,
        record.planned_output_tokens,
        _micro(record.ttft_s),
        _micro(record.e2e_s),
        record.chunk_count,
        record.prompt_tokens,
        record.output_tokens,
        record.finish_reason,
        record.http_status,
        record.error.value if record.error is not None else None,
        record.error_detail,
        [_micro(gap) for gap in record.itl_s] if keep_gaps else None,
        record.stream,
        record.opening,
    ]
    while len(row) > len(PROBE_COLUMNS) - len(PROBE_DEFAULTS):
        if row[-1] != PROBE_DEFAULTS[len(row) - len(PROBE_COLUMNS) - 1]:
            break
        row.pop()
    return row


def probe_records_line(
    t_s: float, records: Sequence[ProbeRecord], started_at_s: float, *, keep_gaps: bool = False
) -> dict[str, Any]:
    """Requests that ended since the last line; their gaps pooled in log buckets unless kept.

    Pooled, only the gaps of requests that ended well are kept: no statistic reads another's.
    """
    line: dict[str, Any] = {
        "kind": "probe_records",
        "t_s": t_s,
        "rows": [_row(record, started_at_s, keep_gaps) for record in records],
    }
    if not keep_gaps:
        counts: dict[int, int] = {}
        under = 0
        for record in records:
            for gap in record.itl_s if record.ok else ():
                index = itl_bucket(gap)
                if index is None:
                    under += 1
                else:
                    counts[index] = counts.get(index, 0) + 1
        flat: list[int] = []
        previous = 0
        for index, count in sorted(counts.items()):
            flat += [index - previous, count]
            previous = index
        line["itl_buckets"] = flat
        line["itl_under_1us"] = under
    return line


@dataclass(frozen=True, slots=True)
class ProbeRows:
    """One `probe_records` line read back: the requests, and their pooled gaps when not kept.

    With gaps pooled, each record's `itl_s` is empty; `itl_samples_s` gives every gap of the line
    at its bucket's middle (within 0.5% of the gap measured), for ITL percentiles. A record's gap
    count is `chunk_count - 1` and their sum `e2e_s - ttft_s` either way.
    """

    t_s: float
    records: tuple[ProbeRecord, ...]
    itl_buckets: tuple[tuple[float, int], ...] | None

    def itl_samples_s(self) -> list[float]:
        """Every gap of the line: exact when kept, else each at its bucket's middle."""
        if self.itl_buckets is None:
            return [gap for record in self.records for gap in record.itl_s]
        return [value for value, count in self.itl_buckets for _ in range(count)]


def _record(row: Sequence[Any], started_at_s: float) -> ProbeRecord:
    shortest = len(PROBE_COLUMNS) - len(PROBE_DEFAULTS)
    if not shortest <= len(row) <= len(PROBE_COLUMNS):
        raise ValueError(
            f"a probe row holds {len(row)} values; expected {shortest} to {len(PROBE_COLUMNS)}"
        )
    full = [*row, *PROBE_DEFAULTS[len(row) - shortest :]]
    values = dict(zip(PROBE_COLUMNS, full, strict=True))
    return ProbeRecord(
        request_id=int(values["request_id"]),
        step=int(values["step"]),
        sent_at_s=started_at_s + float(values["sent_at_s"]),
        done_at_s=started_at_s + float(values["done_at_s"]),
        in_flight_at_send=int(values["in_flight_at_send"]),
        planned_prompt_tokens=values["planned_prompt_tokens"],
        planned_output_tokens=int(values["planned_output_tokens"]),
        ttft_s=values["ttft_s"],
        itl_s=tuple(float(gap) for gap in values["itl_s"] or ()),
        e2e_s=values["e2e_s"],
        chunk_count=int(values["chunk_count"]),
        prompt_tokens=values["prompt_tokens"],
        output_tokens=values["output_tokens"],
        finish_reason=values["finish_reason"],
        error=ErrorClass(values["error"]) if values["error"] is not None else None,
        error_detail=str(values["error_detail"]),
        http_status=values["http_status"],
        stream=None if values["stream"] is None else int(values["stream"]),
        opening=bool(values["opening"]),
    )


def decode_probe_records(line: Mapping[str, Any], started_at_s: float) -> ProbeRows:
    """A `probe_records` line as records (times back on the Unix clock) and pooled gaps."""
    records = tuple(_record(row, started_at_s) for row in line["rows"])
    flat = line.get("itl_buckets")
    buckets: tuple[tuple[float, int], ...] | None = None
    if flat is not None:
        pairs: list[tuple[float, int]] = []
        index = 0
        for step, count in zip(flat[::2], flat[1::2], strict=True):
            index += int(step)
            pairs.append((itl_bucket_value_s(index), int(count)))
        under = int(line.get("itl_under_1us", 0))
        buckets = tuple(([(0.0, under)] if under else []) + pairs)
    return ProbeRows(float(line["t_s"]), records, buckets)


def probe_event_line(event: ProbeEvent) -> dict[str, Any]:
    """A change of the probe's load, stamped when it took effect in the probe; one that says the
    probe turned client-bound (or caught up) carries its lag in `lag_s`."""
    line = {
        "kind": "probe_event",
        "t_s": event.at_s,
        "event": event.kind.value,
        "step": event.step,
        "mode": event.mode,
        "concurrency": event.concurrency,
        "rate_rps": fmt.finite(event.rate_rps),
        "burstiness": fmt.finite(event.burstiness),
        "detail": event.detail,
    }
    if event.lag_s is not None:
        line["lag_s"] = fmt.finite(event.lag_s)
    return line


def decode_probe_event(line: Mapping[str, Any]) -> ProbeEvent:
    """A `probe_event` line as the event it was."""
    return ProbeEvent(
        at_s=float(line["t_s"]),
        kind=EventKind(line["event"]),
        step=int(line["step"]),
        mode=line.get("mode"),
        concurrency=line.get("concurrency"),
        rate_rps=line.get("rate_rps"),
        burstiness=line.get("burstiness"),
        detail=str(line.get("detail", "")),
        lag_s=line.get("lag_s"),  # absent from lines older than the probe's lag
    )


def gpu_line(gpu: GpuSnapshot) -> dict[str, Any]:
    """A reading of the GPUs (or why none is visible), every field kept."""
    data = dataclasses.asdict(gpu)
    for device in data["devices"]:
        device["power_draw_w"] = fmt.finite(device["power_draw_w"])
        device["power_limit_w"] = fmt.finite(device["power_limit_w"])
    return {"kind": "gpu", "t_s": data.pop("taken_at_s"), **data}


def _device(data: Mapping[str, Any]) -> GpuDevice:
    processes = data.get("processes")
    reasons = data.get("throttle_reasons")
    return GpuDevice(
        **{
            **data,
            "throttle_reasons": tuple(reasons) if reasons is not None else None,
            "processes": tuple(GpuProcess(**p) for p in processes)
            if processes is not None
            else None,
        }
    )


def decode_gpu(line: Mapping[str, Any]) -> GpuSnapshot:
    """A `gpu` line as the snapshot it was."""
    return GpuSnapshot(
        taken_at_s=float(line["t_s"]),
        devices=tuple(_device(device) for device in line.get("devices", ())),
        unavailable_cause=line.get("unavailable_cause"),
        driver_version=line.get("driver_version"),
        selection_note=line.get("selection_note"),
    )
