"""One parsed scrape reduced to what slotop reads, under canonical keys, whatever the engine
(vLLM or SGLang, told from the families' prefix unless named) and its version.

Counters and histograms stay per series (per engine, per pid in multiprocess mode) so that resets
are found series by series, as Prometheus does, before anything is summed. Gauges are summed
across engines by the helpers here; series that differ only by `pid` take the largest value,
since two processes reporting one engine's state would otherwise count it twice; so do SGLang's
series that differ only by tensor-, pipeline- or expert-parallel rank, each rank's scheduler
reporting the same batch.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from slotop.collectors.engines import CATALOGUES, READ_SAMPLES, SCRAPED_PREFIXES, engine_of_names
from slotop.collectors.histograms import Bucket
from slotop.collectors.names import Catalogue, Engine, MetricSpec
from slotop.collectors.parse import (
    Exposition,
    Family,
    LabelSet,
    MetricsParser,
    Sample,
    Scan,
)

ENGINE_LABEL = "engine"
PID_LABEL = "pid"
_REPLICATED_LABELS = (PID_LABEL, "tp_rank", "pp_rank", "moe_ep_rank")
_BUCKET_LABEL = "le"
_NO_VALUE = ("", "None", "none", "null")


@dataclass(frozen=True, slots=True)
class HistogramSeries:
    """One histogram series: cumulative buckets sorted by bound, its count and sum."""

    buckets: tuple[Bucket, ...]
    count: float | None
    sum: float | None


@dataclass(frozen=True, slots=True)
class CacheConfig:
    """What `vllm:cache_config_info` says about one engine's KV cache; None where it is silent."""

    engine: str
    block_size_tokens: int | None
    num_gpu_blocks: int | None
    cache_dtype: str | None
    gpu_memory_utilization: float | None
    kv_cache_size_tokens: int | None
    max_concurrency: float | None


@dataclass(frozen=True, slots=True)
class Reading:
    """One scrape under canonical keys (see names.py), plus what it lacked and did not know.

    `missing` and `unknown` hold the engine's metric names: the snapshot's inputs the replica
    lacks (newest name), and the engine's families its catalogue does not know. `engine` is the
    serving engine (vLLM or SGLang); `engines` are vLLM's engine cores (its `engine` label).
    """

    counters: Mapping[str, Mapping[LabelSet, float]]
    histograms: Mapping[str, Mapping[LabelSet, HistogramSeries]]
    gauges: Mapping[str, Mapping[LabelSet, float]]
    cache_configs: tuple[CacheConfig, ...]
    model_names: tuple[str, ...]
    engines: tuple[str, ...]
    found_names: Mapping[str, str]
    missing: tuple[str, ...]
    unknown: tuple[str, ...]
    v0_engine: bool
    engine: Engine = "vllm"


def _without(labels: LabelSet, *names: str) -> LabelSet:
    return tuple(pair for pair in labels if pair[0] not in names)


def _find(exposition: Exposition, spec: MetricSpec) -> tuple[str, list[Family]] | None:
    """Return the first of a spec's names present, with its families (typed, or untyped parts)."""
    for name in spec.names:
        family = exposition.get(name)
        if family is not None and family.kind != "untyped":
            return name, [family]
        if spec.kind == "counter":
            parts = [exposition.get(name + "_total"), family]
        elif spec.kind == "histogram":
            parts = [exposition.get(name + suffix) for suffix in ("_bucket", "_count", "_sum")]
        else:
            parts = [family]
        found = [part for part in parts if part is not None]
        if found:
            return name, found
    return None


def _counter_series(name: str, families: list[Family]) -> dict[LabelSet, float]:
    series: dict[LabelSet, float] = {}
    for family in families:
        for sample in family.samples:
            if sample.name in (name, name + "_total"):
                series[sample.labels] = sample.value
    return series


def _histogram_series(name: str, families: list[Family]) -> dict[LabelSet, HistogramSeries]:
    buckets: dict[LabelSet, list[Bucket]] = {}
    counts: dict[LabelSet, float] = {}
    sums: dict[LabelSet, float] = {}
    for family in families:
        for sample in family.samples:
            if sample.name == name + "_bucket":
                bound = sample.label(_BUCKET_LABEL)
                if bound is None:
                    continue
                key = _without(sample.labels, _BUCKET_LABEL)
                buckets.setdefault(key, []).append((float(bound), sample.value))
            elif sample.name == name + "_count":
                counts[sample.labels] = sample.value
            elif sample.name == name + "_sum":
                sums[sample.labels] = sample.value
    return {
        key: HistogramSeries(tuple(sorted(found)), counts.get(key), sums.get(key))
        for key, found in buckets.items()
    }


def _gauge_series(families: list[Family]) -> dict[LabelSet, float]:
    return {sample.labels: sample.value for family in families for sample in family.samples}


def _float_label(sample: Sample, name: str) -> float | None:
    text = sample.label(name)
    if text is None or text in _NO_VALUE:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _int_label(sample: Sample, name: str) -> int | None:
    number = _float_label(sample, name)
    return None if number is None else int(number)


def _cache_configs(families: list[Family]) -> tuple[CacheConfig, ...]:
    configs: dict[str, CacheConfig] = {}
    for family in families:
        for sample in family.samples:
            engine = sample.label(ENGINE_LABEL) or ""
            dtype = sample.label("cache_dtype")
            configs[engine] = CacheConfig(
                engine=engine,
                block_size_tokens=_int_label(sample, "block_size"),
                num_gpu_blocks=_int_label(sample, "num_gpu_blocks"),
                cache_dtype=None if dtype is None or dtype in _NO_VALUE else dtype,
                gpu_memory_utilization=_float_label(sample, "gpu_memory_utilization"),
                kv_cache_size_tokens=_int_label(sample, "kv_cache_size_tokens"),
                max_concurrency=_float_label(sample, "kv_cache_max_concurrency"),
            )
    return tuple(configs[engine] for engine in sorted(configs))


def _base_name(name: str, catalogue: Catalogue) -> str:
    for suffix in ("_bucket", "_count", "_sum", "_total"):
        if name.endswith(suffix) and catalogue.is_known(name[: -len(suffix)]):
            return name[: -len(suffix)]
    return name


def _engine_order(engine: str) -> tuple[int, str]:
    return len(engine), engine


def exposition_engine(exposition: Exposition) -> Engine:
    """The engine whose families the exposition holds; vLLM when neither's or both's."""
    names = [name for name, family in exposition.families.items() if family.samples]
    return engine_of_names([*names, *exposition.skipped]) or "vllm"


def read_exposition(exposition: Exposition, engine: Engine | None = None) -> Reading:
    """Reduce a parsed exposition to canonical keys, noting what is missing and unknown.

    `engine` names the engine's catalogue to read by; None tells it from the families.
    """
    kind = engine or exposition_engine(exposition)
    catalogue = CATALOGUES[kind]
    counters: dict[str, Mapping[LabelSet, float]] = {}
    histograms: dict[str, Mapping[LabelSet, HistogramSeries]] = {}
    gauges: dict[str, Mapping[LabelSet, float]] = {}
    found_names: dict[str, str] = {}
    cache_configs: tuple[CacheConfig, ...] = ()
    model_names: set[str] = set()
    engines: set[str] = set()
    for spec in catalogue.specs:
        found = _find(exposition, spec)
        if found is None:
            if spec.zero_when_absent:
                counters[spec.key] = MappingProxyType({})
            continue
        name, families = found
        found_names[spec.key] = name
        for stood_in_for in spec.stands_in_for:
            found_names.setdefault(stood_in_for, name)
        if not spec.used:
            continue
        for family in families:
            for sample in family.samples:
                model = sample.label("model_name")
                if model:
                    model_names.add(model)
                core = sample.label(ENGINE_LABEL)
                if core:
                    engines.add(core)
        if spec.kind == "counter":
            counters[spec.key] = MappingProxyType(_counter_series(name, families))
        elif spec.kind == "histogram":
            histograms[spec.key] = MappingProxyType(_histogram_series(name, families))
        elif spec.kind == "info":
            cache_configs = _cache_configs(families)
        else:
            gauges[spec.key] = MappingProxyType(_gauge_series(families))
    missing = [
        spec.names[0]
        for spec in catalogue.specs
        if spec.used
        and not spec.optional
        and not spec.zero_when_absent
        and spec.key not in found_names
    ]
    prefix = catalogue.prefix
    bases = {
        _base_name(name, catalogue)
        for name, family in exposition.families.items()
        if family.samples and name.startswith(prefix)
    }
    bases |= {_base_name(name, catalogue) for name in exposition.skipped if name.startswith(prefix)}
    return Reading(
        counters=MappingProxyType(counters),
        histograms=MappingProxyType(histograms),
        gauges=MappingProxyType(gauges),
        cache_configs=cache_configs,
        model_names=tuple(sorted(model_names)),
        engines=tuple(sorted(engines, key=_engine_order)),
        found_names=MappingProxyType(found_names),
        missing=tuple(missing),
        unknown=tuple(sorted(name for name in bases if not catalogue.is_known(name))),
        v0_engine="requests_swapped" in found_names,
        engine=kind,
    )


class ScrapeReader:
    """Reads one replica's scrapes into Readings, remembering how the last body's samples map
    onto a Reading: while a replica's bodies keep their shape (the same series in the same order,
    the same types declared, as from one scrape to the next), a scrape costs reading its lines
    and placing its values, not regrouping families and looking up the catalogue again.

    Every value of a Reading is one sample's value where the body's shape puts it, so the map is
    found by reading the body once with each sample's index in place of its value.
    """

    def __init__(self, engine: Engine | None = None) -> None:
        self.engine = engine
        self.parser = MetricsParser(prefix=SCRAPED_PREFIXES, reads=READ_SAMPLES)
        self._shape: Scan | None = None
        self._template: Reading | None = None

    def read(self, text: str) -> Reading:
        """Parse a /metrics body and reduce it to a Reading (see read_exposition)."""
        scan = self.parser.scan(text)
        shape, template = self._shape, self._template
        if shape is None or template is None or not _same_shape(shape, scan):
            indices = [float(index) for index in range(len(scan.values))]
            template = read_exposition(self.parser.group(scan, indices), self.engine)
            self._shape, self._template = scan, template
        return _filled(template, scan.values)


def _same_shape(before: Scan, now: Scan) -> bool:
    if len(before.series) != len(now.series) or before.declared != now.declared:
        return False
    if before.skipped != now.skipped:
        return False
    return all(old is new for old, new in zip(before.series, now.series, strict=True))


def _filled(template: Reading, values: list[float]) -> Reading:
    """The template Reading with each sample index replaced by that sample's value."""

    def scalars(
        by_key: Mapping[str, Mapping[LabelSet, float]],
    ) -> Mapping[str, Mapping[LabelSet, float]]:
        return MappingProxyType(
            {
                key: MappingProxyType({labels: values[int(at)] for labels, at in series.items()})
                for key, series in by_key.items()
            }
        )

    def one(at: float | None) -> float | None:
        return None if at is None else values[int(at)]

    histograms = {
        key: MappingProxyType(
            {
                labels: HistogramSeries(
                    tuple((bound, values[int(at)]) for bound, at in found.buckets),
                    one(found.count),
                    one(found.sum),
                )
                for labels, found in series.items()
            }
        )
        for key, series in template.histograms.items()
    }
    return dataclasses.replace(
        template,
        counters=scalars(template.counters),
        gauges=scalars(template.gauges),
        histograms=MappingProxyType(histograms),
    )


def read_metrics_text(text: str, engine: Engine | None = None) -> Reading:
    """Parse one /metrics body (the catalogues' families only) and reduce it to a Reading;
    `engine` None tells the engine from the families.

    A replica scraped again and again is read by a ScrapeReader, which remembers its bodies.
    """
    parser = MetricsParser(prefix=SCRAPED_PREFIXES, reads=READ_SAMPLES)
    return read_exposition(parser.parse(text), engine)


def gauge_totals(series: Mapping[LabelSet, float], by: str | None = None) -> dict[str, float]:
    """Sum a gauge's series grouped by one label ("" where absent), taking the max across pids
    (and SGLang's parallel ranks)."""
    collapsed: dict[LabelSet, float] = {}
    for labels, value in series.items():
        if math.isnan(value):
            continue
        key = _without(labels, *_REPLICATED_LABELS)
        collapsed[key] = max(value, collapsed.get(key, value))
    totals: dict[str, float] = {}
    for labels, value in collapsed.items():
        group = ""
        if by is not None:
            group = next((label_value for name, label_value in labels if name == by), "")
        totals[group] = totals.get(group, 0.0) + value
    return totals


def gauge_total(reading: Reading, key: str) -> float | None:
    """Return a gauge summed across engines, None when the replica does not expose it."""
    series = reading.gauges.get(key)
    if not series:
        return None
    return gauge_totals(series).get("")


def with_exact_loads(
    reading: Reading, running: float, waiting: float, used_tokens: float, total_tokens: float
) -> Reading:
    """The reading with its scheduler gauges replaced by counts taken when asked (SGLang's
    `/v1/loads`), where its /metrics gauges lag."""
    exact = {
        "requests_running": running,
        "requests_waiting": waiting,
        "kv_used_tokens": used_tokens,
        "kv_total_tokens": total_tokens,
        "kv_usage": used_tokens / total_tokens if total_tokens > 0 else 0.0,
    }
    gauges = dict(reading.gauges)
    for key, value in exact.items():
        gauges[key] = MappingProxyType({(): value})
    return dataclasses.replace(reading, gauges=MappingProxyType(gauges))
