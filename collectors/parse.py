"""Prometheus text exposition → typed, frozen families, via prometheus_client's parser.

prometheus_client parses each distinct line shape (name, labels; or a `# TYPE`/`# HELP` line)
once; a MetricsParser remembers the result, so a replica scraped every second costs a dictionary
look-up and a float() per line instead of a character-by-character parse. Families are regrouped
here from the `# TYPE` lines rather than taken from the parser's grouping, which splits a family
whenever another family's line (a `_created` series, an untyped line) comes between its samples;
`_created` series are dropped, labels are sorted, so any label or sample order gives one result.

A parser told which sample names it `reads` leaves every other sample line unparsed: its name is
checked and kept (so unknown families can still be named), its labels and value are not read and
not remembered. A page of tens of thousands of series slotop does not read (one per LoRA adapter,
say) then costs a look at each line's name, not a parse and a cache entry per line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from types import MappingProxyType

from prometheus_client.parser import text_string_to_metric_families

from slotop.collectors.errors import MetricsParseError
from slotop.fmt import printable

LabelSet = tuple[tuple[str, str], ...]

_SUFFIXES: Mapping[str, tuple[str, ...]] = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "summary": ("_count", "_sum"),
}
_CUMULATIVE_KINDS = frozenset({"counter", "histogram", "summary", "gaugehistogram"})
_UNTYPED = frozenset({"untyped", "unknown"})
_CREATED = "_created"
_SHOWN_CHARS = 120
DEFAULT_MAX_CACHED_LINES = 50_000
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_AFTER_NAME = frozenset("{ \t")


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of a family: full sample name, labels sorted by name, value."""

    name: str
    labels: LabelSet
    value: float

    def label(self, name: str) -> str | None:
        """Return the value of one label, None when the sample lacks it."""
        for key, value in self.labels:
            if key == name:
                return value
        return None


@dataclass(frozen=True, slots=True)
class Family:
    """A metric family: its base name (counters without `_total`), its type, its samples."""

    name: str
    kind: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True, slots=True)
class Exposition:
    """A parsed /metrics body: families by base name, and the names of the families it held
    that the parser was told not to read."""

    families: Mapping[str, Family]
    skipped: frozenset[str] = frozenset()

    def get(self, name: str) -> Family | None:
        """Return a family with at least one sample, None when absent or empty."""
        family = self.families.get(name)
        if family is None or not family.samples:
            return None
        return family


@dataclass(frozen=True, slots=True)
class Scan:
    """A body read line by line: its declared types, each sample's series and value, and the
    sample names it left unread."""

    declared: dict[str, str]
    series: list[tuple[str, LabelSet]]
    values: list[float]
    skipped: set[str]


@dataclass(frozen=True, slots=True)
class _Declared:
    """A `# TYPE` line: the family name as the parser reports it, and its type."""

    name: str
    kind: str


_Comment = _Declared | None
_Series = tuple[str, LabelSet]


def _shorten(line: str) -> str:
    return line if len(line) <= _SHOWN_CHARS else line[: _SHOWN_CHARS - 1] + "…"


def _refused(number: int, line: str, exc: Exception) -> MetricsParseError:
    detail = printable(_shorten(str(exc))) or type(exc).__name__
    return MetricsParseError(
        f"not Prometheus text exposition format at line {number}: {_shorten(line)!r} "
        f"({detail}); check that the URL or file is a /metrics body"
    )


def _parse_comment(number: int, line: str) -> _Comment:
    """Let prometheus_client read one comment line; return what a `# TYPE` line declares."""
    try:
        families = list(text_string_to_metric_families(line + "\n"))
    except Exception as exc:
        raise _refused(number, line, exc) from exc
    if line.split(None, 2)[1:2] != ["TYPE"] or not families:
        return None
    family = families[-1]
    return _Declared(family.name, family.type)


def _parse_sample_line(number: int, line: str) -> tuple[str, LabelSet, float]:
    """Let prometheus_client read one sample line; return name, sorted labels and value."""
    try:
        families = list(text_string_to_metric_families(line + "\n"))
        (sample,) = [sample for family in families for sample in family.samples]
    except Exception as exc:
        raise _refused(number, line, exc) from exc
    value = sample.value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refused(number, line, ValueError("the value is not a number"))
    return sample.name, tuple(sorted(sample.labels.items())), float(value)


def _split_value(line: str) -> tuple[str, str, str | None] | None:
    """Split a sample line into series, value and timestamp texts; None when it is not simple."""
    brace = line.rfind("}")
    if brace >= 0:
        series, rest = line[: brace + 1], line[brace + 1 :]
    else:
        parts = line.split(None, 1)
        if len(parts) != 2:
            return None
        series, rest = parts
    tokens = rest.split()
    if not 1 <= len(tokens) <= 2 or "_" in rest:
        return None
    return series, tokens[0], tokens[1] if len(tokens) == 2 else None


def _owners(declared: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Map every sample name a declared family may hold to (family name, family type)."""
    owners: dict[str, tuple[str, str]] = {}
    for name, kind in declared.items():
        for suffix in _SUFFIXES.get(kind, ()):
            owners.setdefault(name + suffix, (name, kind))
    for name, kind in declared.items():
        owners.setdefault(name, (name, kind))
    return owners


def _is_created(name: str, declared: Mapping[str, str]) -> bool:
    return name.endswith(_CREATED) and declared.get(name[: -len(_CREATED)]) in _CUMULATIVE_KINDS


def _check_bucket(name: str, labels: LabelSet) -> None:
    bound = dict(labels).get("le")
    if bound is None:
        raise MetricsParseError(f"histogram bucket {name}{dict(labels)} has no le label")
    try:
        parsed = float(bound)
    except ValueError:
        raise MetricsParseError(f"histogram bucket {name} has le={bound!r}, not a number") from None
    if math.isnan(parsed):
        raise MetricsParseError(f"histogram bucket {name} has le=NaN")


class MetricsParser:
    """Parses /metrics bodies, remembering each distinct line shape prometheus_client has read."""

    def __init__(
        self,
        *,
        prefix: str | tuple[str, ...] | None = None,
        max_cached_lines: int = DEFAULT_MAX_CACHED_LINES,
        reads: Set[str] | None = None,
    ) -> None:
        self.prefix = prefix
        self.reads = reads
        self._max_cached = max_cached_lines
        self._series: dict[str, _Series] = {}
        self._comments: dict[str, _Comment] = {}

    def _remember(self) -> None:
        if len(self._series) + len(self._comments) > self._max_cached:
            self._series.clear()
            self._comments.clear()

    def _comment(self, number: int, line: str) -> _Comment:
        if line in self._comments:
            return self._comments[line]
        parts = line.split(None, 2)
        result = None
        if len(parts) >= 2 and parts[1] in ("TYPE", "HELP"):
            result = _parse_comment(number, line)
        self._remember()
        self._comments[line] = result
        return result

    def _sample(self, number: int, line: str) -> tuple[_Series, float]:
        split = _split_value(line)
        if split is not None:
            series_text, value_text, timestamp_text = split
            known = self._series.get(series_text)
            if known is not None:
                try:
                    if timestamp_text is not None:
                        float(timestamp_text)
                    return known, float(value_text)
                except ValueError:
                    pass
        name, labels, value = _parse_sample_line(number, line)
        series = (name, labels)
        if split is not None:
            self._remember()
            self._series[split[0]] = series
        return series, value

    def parse(self, text: str) -> Exposition:
        """Parse a /metrics body, keeping families whose names start with the prefix (or prefixes).

        Raises MetricsParseError, naming the line, for text that is not the exposition format,
        for a series given twice and for a histogram bucket without a numeric `le`.
        """
        return self.group(self.scan(text))

    def scan(self, text: str) -> Scan:
        """Read a body's lines: what its `# TYPE` lines declare, and each sample's series and
        value in order (a series read before is the same object as then). Raises
        MetricsParseError, naming the line, for text that is not the exposition format."""
        declared: dict[str, str] = {}
        series_seen: list[_Series] = []
        values: list[float] = []
        skipped: set[str] = set()
        add_series, add_value = series_seen.append, values.append
        known = self._series
        reads = self.reads
        for number, raw_line in enumerate(text.splitlines(), start=1):
            # The common line, `series value` with one space, of a series read before: one
            # look-up. Anything else (a timestamp, odd spacing, a comment) goes the long way.
            head, _, tail = raw_line.rpartition(" ")
            series = known.get(head)
            if series is not None and "_" not in tail:
                try:
                    add_value(float(tail))
                except ValueError:
                    pass
                else:
                    add_series(series)
                    continue
            if reads is not None:  # a sample of a family not read: its name only
                name = _NAME.match(raw_line)
                end = name.end() if name is not None else 0
                if (
                    name is not None
                    and end < len(raw_line)
                    and raw_line[end] in _AFTER_NAME
                    and name.group() not in reads
                    and (raw_line[end] != "{" or raw_line.rfind("} ") > end)
                ):
                    skipped.add(name.group())
                    continue
            line = raw_line.strip()
            if not line:
                continue
            if line.startswith("#"):
                comment = self._comment(number, line)
                if comment is not None and comment.kind not in _UNTYPED:
                    declared[comment.name] = comment.kind
                continue
            series, value = self._sample(number, line)
            add_series(series)
            add_value(value)
        return Scan(declared, series_seen, values, skipped)

    def group(self, scan: Scan, values: Sequence[float] | None = None) -> Exposition:
        """Group a scan's samples into families (with `values` in place of the scan's own, one
        per sample, when given). Raises MetricsParseError for a series given twice and for a
        histogram bucket without a numeric `le`."""
        taken = scan.values if values is None else values
        return self._group(scan.declared, zip(scan.series, taken, strict=True), scan.skipped)

    def _group(
        self,
        declared: Mapping[str, str],
        raw: Iterable[tuple[_Series, float]],
        skipped: Set[str] = frozenset(),
    ) -> Exposition:
        owners = _owners(declared)
        prefix = self.prefix
        grouped: dict[str, list[Sample]] = {
            name: []
            for name in declared
            if (prefix is None or name.startswith(prefix)) and not _is_created(name, declared)
        }
        kinds = dict(declared)
        seen: set[_Series] = set()
        for (name, labels), value in raw:
            if prefix is not None and not name.startswith(prefix):
                continue
            if _is_created(name, declared):
                continue
            if (name, labels) in seen:
                raise MetricsParseError(
                    f"series {name}{dict(labels)} appears twice; a /metrics body holds each "
                    "series once (was a dump pasted twice?)"
                )
            seen.add((name, labels))
            owner, kind = owners.get(name, (name, "untyped"))
            if kind == "histogram" and name == owner + "_bucket":
                _check_bucket(name, labels)
            grouped.setdefault(owner, []).append(Sample(name, labels, value))
            kinds.setdefault(owner, kind)
        return Exposition(
            MappingProxyType(
                {name: Family(name, kinds[name], tuple(found)) for name, found in grouped.items()}
            ),
            frozenset(
                owners.get(name, (name, ""))[0]
                for name in skipped
                if not _is_created(name, declared)
            ),
        )


def parse_metrics(text: str, *, prefix: str | tuple[str, ...] | None = None) -> Exposition:
    """Parse one /metrics body with a fresh parser (see MetricsParser.parse)."""
    return MetricsParser(prefix=prefix).parse(text)
