"""Readings as recording lines: each series gets a slot id once, then only what changed goes out.

A `reading` line holds `new` (slots first seen: id, what, canonical key, labels, and for a
histogram its bucket bounds), `set` (a flat list of slot id and value for every scalar that
changed: counters, gauges, a histogram's count and sum), `buckets` (per histogram that changed,
either `[id, "+", [i, n, ...]]`, the new observations n in bucket i since the previous line, or
`[id, "=", [cumulative values]]` where increments would not be exact), `gone` (slots present in
the previous reading and absent from this one), and `meta` / `info` / `notes` only when they
changed. A value that is not a finite number is written as null and read back as NaN, which every
collector already treats as absent. Encoder and decoder are pure; the decoder rebuilds the very
`Reading`, float for float.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any, Literal

from slotop.collectors.engines import parse_engine
from slotop.collectors.histograms import Bucket
from slotop.collectors.monitor import MonitorPoll
from slotop.collectors.names import Engine
from slotop.collectors.parse import LabelSet
from slotop.collectors.reading import CacheConfig, HistogramSeries, Reading
from slotop.collectors.snapshot import ReplicaInfo

SlotKind = Literal["counter", "gauge", "count", "sum", "buckets"]
SlotKey = tuple[SlotKind, str, LabelSet, tuple[float, ...]]
"""What a slot holds, its canonical key, its labels, and a histogram's bucket bounds (else ())."""
_EXACT = 2.0**53


class ReadingFormatError(ValueError):
    """A reading line that does not decode; the message names the field."""


def json_number(value: float) -> float | int | None:
    """A float for JSON: null when not finite, an int when whole (shorter, and reads back equal)."""
    if not math.isfinite(value):
        return None
    if value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def _bound_text(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


def _slots(reading: Reading) -> tuple[dict[SlotKey, float], dict[SlotKey, tuple[float, ...]]]:
    """A reading's scalars and its histograms' bucket vectors, by slot."""
    scalars: dict[SlotKey, float] = {}
    vectors: dict[SlotKey, tuple[float, ...]] = {}
    for key, counter_series in reading.counters.items():
        for labels, value in counter_series.items():
            scalars[("counter", key, labels, ())] = value
    for key, gauge_series in reading.gauges.items():
        for labels, value in gauge_series.items():
            scalars[("gauge", key, labels, ())] = value
    for key, histogram_series in reading.histograms.items():
        for labels, series in histogram_series.items():
            bounds = tuple(bound for bound, _ in series.buckets)
            vectors[("buckets", key, labels, bounds)] = tuple(v for _, v in series.buckets)
            if series.count is not None:
                scalars[("count", key, labels, ())] = series.count
            if series.sum is not None:
                scalars[("sum", key, labels, ())] = series.sum
    return scalars, vectors


def _whole(values: tuple[float, ...]) -> bool:
    return all(math.isfinite(v) and v.is_integer() and abs(v) < _EXACT for v in values)


def bucket_change(before: tuple[float, ...] | None, now: tuple[float, ...]) -> list[Any] | None:
    """How a bucket vector changed: None if not, ["+", [i, n, ...]] as new observations per
    bucket when that is exact (whole counts), else ["=", values]."""
    if before is not None and len(before) == len(now) and _whole(before) and _whole(now):
        steps: list[int] = []
        below = 0.0
        for index, (old, new) in enumerate(zip(before, now, strict=True)):
            step = (new - old) - below
            below = new - old
            if step:
                steps += [index, int(step)]
        return ["+", steps] if steps else None
    if before is not None and len(before) == len(now) and all(map(_same, before, now)):
        return None
    return ["=", [json_number(v) for v in now]]


def _meta(reading: Reading) -> dict[str, Any]:
    return {
        "cache_configs": [asdict(config) for config in reading.cache_configs],
        "model_names": list(reading.model_names),
        "engines": list(reading.engines),
        "found_names": dict(reading.found_names),
        "missing": list(reading.missing),
        "unknown": list(reading.unknown),
        "v0_engine": reading.v0_engine,
        "engine": reading.engine,
    }


def info_json(info: ReplicaInfo) -> dict[str, Any]:
    """Who the replica is, as JSON-ready data."""
    data = asdict(info)
    data["served_models"] = list(info.served_models)
    return data


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


class ReadingEncoder:
    """Turns each poll into a `reading` line holding what changed since the previous one."""

    def __init__(self) -> None:
        self._ids: dict[SlotKey, int] = {}
        self._scalars: dict[SlotKey, float] = {}
        self._vectors: dict[SlotKey, tuple[float, ...]] = {}
        self._meta: dict[str, Any] = {}
        self._info: dict[str, Any] | None = None
        self._notes: tuple[str, ...] | None = None

    def encode(self, poll: MonitorPoll) -> dict[str, Any]:
        """The line for one poll: times, new slots, changed values, gone slots, changed context."""
        line: dict[str, Any] = {
            "kind": "reading",
            "t_s": poll.snapshot.taken_at_s,
            "mono_s": poll.mono_s,
        }
        scalars, vectors = _slots(poll.reading)
        new: list[list[Any]] = []
        changed: list[float | int | None] = []
        buckets: list[list[Any]] = []
        for slot in (*scalars, *vectors):
            if slot not in self._ids:
                self._ids[slot] = len(self._ids)
                what, key, labels, bounds = slot
                declared: list[Any] = [self._ids[slot], what, key, [list(p) for p in labels]]
                if what == "buckets":
                    declared.append([_bound_text(bound) for bound in bounds])
                new.append(declared)
        for slot, value in scalars.items():
            before = self._scalars.get(slot)
            if before is None or not _same(before, value):
                changed += [self._ids[slot], json_number(value)]
        for slot, vector in vectors.items():
            change = bucket_change(self._vectors.get(slot), vector)
            if change is not None:
                buckets.append([self._ids[slot], *change])
        gone = sorted(
            self._ids[slot]
            for slot in (*self._scalars, *self._vectors)
            if slot not in scalars and slot not in vectors
        )
        self._scalars, self._vectors = scalars, vectors
        parts = (("new", new), ("set", changed), ("buckets", buckets), ("gone", gone))
        line.update((name, items) for name, items in parts if items)
        meta = _meta(poll.reading)
        delta = {key: value for key, value in meta.items() if self._meta.get(key) != value}
        self._meta = meta
        if delta:
            line["meta"] = delta
        info = info_json(poll.info)
        if info != self._info:
            line["info"] = self._info = info
        if poll.notes != self._notes:
            self._notes = poll.notes
            line["notes"] = list(poll.notes)
        return line


@dataclass(frozen=True, slots=True)
class DecodedReading:
    """One recorded poll: when (wall and monotonic), the reading, who answered, the monitor's notes."""

    t_s: float
    mono_s: float
    reading: Reading
    info: ReplicaInfo
    notes: tuple[str, ...]


def _float(value: Any, what: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReadingFormatError(f"{what} is {value!r}; expected a number or null")
    return float(value)


def _labels(value: Any) -> LabelSet:
    if not isinstance(value, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) for p in pair)
        for pair in value
    ):
        raise ReadingFormatError(f"labels {value!r}; expected a list of [name, value] pairs")
    return tuple((name, text) for name, text in value)


def _cache_config(data: Mapping[str, Any]) -> CacheConfig:
    try:
        return CacheConfig(**data)
    except TypeError as exc:
        raise ReadingFormatError(f"cache config {dict(data)!r}: {exc}") from None


def _engine(value: Any) -> Engine:
    try:
        return parse_engine(str(value))
    except ValueError as exc:
        raise ReadingFormatError(f"reading meta: {exc}") from None


def _info(data: Mapping[str, Any]) -> ReplicaInfo:
    fields = dict(data)
    if "vllm_version" in fields:  # recordings before SGLang: the version was vLLM's
        fields["version"] = fields.pop("vllm_version")
    if "engine" in fields:
        fields["engine"] = _engine(fields["engine"])
    try:
        return ReplicaInfo(**{**fields, "served_models": tuple(fields.get("served_models") or ())})
    except TypeError as exc:
        raise ReadingFormatError(f"replica info {dict(data)!r}: {exc}") from None


class ReadingDecoder:
    """Rebuilds each recorded `Reading` from its line and the lines before it."""

    def __init__(self) -> None:
        self._slots: dict[int, SlotKey] = {}
        self._scalars: dict[int, float] = {}
        self._vectors: dict[int, tuple[float, ...]] = {}
        self._meta: dict[str, Any] = {}
        self._info = ReplicaInfo()
        self._notes: tuple[str, ...] = ()

    def _declare(self, entries: Sequence[Any]) -> None:
        for entry in entries:
            if not isinstance(entry, list) or len(entry) not in (4, 5):
                raise ReadingFormatError(
                    f"slot {entry!r}; expected [id, what, key, labels, bounds?]"
                )
            slot_id, what, key, labels = entry[:4]
            if what not in ("counter", "gauge", "count", "sum", "buckets"):
                raise ReadingFormatError(f"slot {slot_id} is a {what!r}; no such slot kind")
            if (what == "buckets") != (len(entry) == 5):
                raise ReadingFormatError(f"slot {slot_id}: bounds go with buckets, and only there")
            bounds = tuple(float(bound) for bound in entry[4]) if len(entry) == 5 else ()
            self._slots[int(slot_id)] = (what, str(key), _labels(labels), bounds)

    def _slot(self, slot_id: Any, field: str) -> SlotKey:
        slot = self._slots.get(slot_id)
        if slot is None:
            raise ReadingFormatError(f"{field} names slot {slot_id!r}, never declared")
        return slot

    def _set_buckets(self, entry: Any) -> None:
        if not isinstance(entry, list) or len(entry) != 3 or entry[1] not in ("+", "="):
            raise ReadingFormatError(f"buckets entry {entry!r}; expected [id, '+' or '=', list]")
        slot_id, how, data = entry
        bounds = self._slot(slot_id, "buckets")[3]
        if how == "=":
            values = tuple(_float(v, f"slot {slot_id}") for v in data)
        else:
            before = self._vectors.get(slot_id)
            if before is None:
                raise ReadingFormatError(f"slot {slot_id} grows before it was ever set")
            steps = dict(zip(data[::2], data[1::2], strict=True))
            out: list[float] = []
            below = 0.0
            for index, old in enumerate(before):
                below += steps.get(index, 0)
                out.append(old + below)
            values = tuple(out)
        if len(values) != len(bounds):
            raise ReadingFormatError(f"slot {slot_id} holds {len(values)} of {len(bounds)} buckets")
        self._vectors[slot_id] = values

    def decode(self, line: Mapping[str, Any]) -> DecodedReading:
        """The reading one line stands for, given every line decoded before it."""
        self._declare(line.get("new", ()))
        values = line.get("set", ())
        if len(values) % 2:
            raise ReadingFormatError("set holds an odd number of items; expected id, value pairs")
        for index in range(0, len(values), 2):
            slot_id = values[index]
            self._slot(slot_id, "set")
            self._scalars[slot_id] = _float(values[index + 1], f"slot {slot_id}")
        for entry in line.get("buckets", ()):
            self._set_buckets(entry)
        for slot_id in line.get("gone", ()):
            self._scalars.pop(slot_id, None)
            self._vectors.pop(slot_id, None)
        self._meta.update(line.get("meta", {}))
        if "info" in line:
            self._info = _info(line["info"])
        if "notes" in line:
            self._notes = tuple(line["notes"])
        return DecodedReading(
            t_s=_float(line.get("t_s"), "t_s"),
            mono_s=_float(line.get("mono_s"), "mono_s"),
            reading=self._reading(),
            info=self._info,
            notes=self._notes,
        )

    def _reading(self) -> Reading:
        counters: dict[str, dict[LabelSet, float]] = {}
        gauges: dict[str, dict[LabelSet, float]] = {}
        tails: dict[tuple[str, LabelSet], dict[str, float]] = {}
        for slot_id, value in sorted(self._scalars.items()):
            what, key, labels, _ = self._slots[slot_id]
            if what == "counter":
                counters.setdefault(key, {})[labels] = value
            elif what == "gauge":
                gauges.setdefault(key, {})[labels] = value
            else:
                tails.setdefault((key, labels), {})[what] = value
        histograms: dict[str, dict[LabelSet, HistogramSeries]] = {}
        for slot_id, vector in sorted(self._vectors.items()):
            _, key, labels, bounds = self._slots[slot_id]
            tail = tails.get((key, labels), {})
            buckets: tuple[Bucket, ...] = tuple(zip(bounds, vector, strict=True))
            series = HistogramSeries(buckets, tail.get("count"), tail.get("sum"))
            histograms.setdefault(key, {})[labels] = series
        meta = self._meta
        return Reading(
            counters=MappingProxyType({k: MappingProxyType(v) for k, v in counters.items()}),
            histograms=MappingProxyType({k: MappingProxyType(v) for k, v in histograms.items()}),
            gauges=MappingProxyType({k: MappingProxyType(v) for k, v in gauges.items()}),
            cache_configs=tuple(_cache_config(c) for c in meta.get("cache_configs", ())),
            model_names=tuple(meta.get("model_names", ())),
            engines=tuple(meta.get("engines", ())),
            found_names=MappingProxyType(dict(meta.get("found_names", {}))),
            missing=tuple(meta.get("missing", ())),
            unknown=tuple(meta.get("unknown", ())),
            v0_engine=bool(meta.get("v0_engine", False)),
            engine=_engine(meta.get("engine", "vllm")),
        )
