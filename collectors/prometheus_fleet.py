"""A fleet read from a Prometheus server: every vLLM and SGLang replica it scrapes, one
`ReplicaFigures` each.

A replica is the set of one engine's series (`vllm:`, `sglang:`) that share the replica labels
(by default `job` and `instance`) and the model label (`model_name`); a data-parallel vLLM
replica's `engine` series, and an SGLang replica's `tp_rank` ones, fold into it. Every name is
matched in both spellings Prometheus may hold it under (`prometheus_names`). One poll runs a
fixed set of queries, all evaluated at the same instant:

- the replicas seen over the window, one query per engine (`group by` of a gauge each engine
  sets from its start: `vllm:num_requests_running`, `sglang:max_total_num_tokens`), and `up`;
- latencies: `sum by (replica, le) (increase(<histogram>_bucket[W]))`, the bucket increases, and
  `histogram_quantile(q, <the same>)`, the percentile Prometheus computes from them, each engine's
  histogram joined with `or`; the bucket the quantile fell in is found in those increases with
  slotop's own histogram_quantile rules;
- throughput and preemptions (SGLang's retractions): `sum by (replica) (rate(<counter>_total[W]))`;
  a counter SGLang has not yet set (it shows one only once counted) reads as zero;
- running, waiting and KV usage: the raw gauge series (and `vllm:cache_config_info`), rebuilt into
  a `Reading` per replica, under its engine, so the single-replica code folds engines and ranks
  and weighs KV blocks or tokens.

Prometheus's `rate` and `increase` extrapolate to the window's edges, so a rate reads a few
percent apart from a direct scrape's over a window that starts or ends mid-traffic; the
extrapolation scales every bucket of a histogram alike, so quantiles are not moved by it. Where
a series begins inside the window (a Prometheus, or a replica, started within it) `rate` still
divides by the whole window and reads low: a poll also asks for each replica's oldest sample
in the window (`min_over_time(timestamp(...)[W:R])`), and a replica whose samples cover less
is a partial window: its `covered_s` says how much, and its rates are taken over that span.
A query that fails leaves its figures unread with the reason; only a failed discovery (or an
unreachable server) fails the whole poll.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from types import MappingProxyType

from slotop.collectors.engines import CATALOGUES, ENGINES
from slotop.collectors.fleet import ALL_FIELDS, FleetPoll, LatencyFigure, ReplicaFigures, ReplicaKey
from slotop.collectors.histograms import Bucket, quantile_estimate
from slotop.collectors.names import Engine
from slotop.collectors.parse import Exposition, Family, Sample
from slotop.collectors.prometheus import (
    PrometheusClient,
    PrometheusError,
    PrometheusUnavailable,
    QueryAnswer,
    VectorSample,
)
from slotop.collectors.prometheus_names import each_spelling, names_regex, served_name
from slotop.collectors.reading import read_exposition
from slotop.collectors.snapshot import kv_cache_state, request_counts

GAUGE_KEYS = (
    "requests_running",
    "requests_waiting",
    "requests_swapped",
    "kv_usage",
    "kv_used_tokens",
    "kv_total_tokens",
    "cache_config",
)
DISCOVERY_NAMES: Mapping[Engine, str] = MappingProxyType(
    {"vllm": "vllm:num_requests_running", "sglang": "sglang:max_total_num_tokens"}
)
"""Per engine, a gauge its replica sets from its start: SGLang's scheduler gauges wait for a
batch, its cache size does not."""
_BUCKET_BOUND_TOLERANCE = 1e-9
_CREATED = "_created"


def promql_duration(seconds: float) -> str:
    """A PromQL range duration: whole milliseconds (`60000ms`), which every version accepts."""
    return f"{max(1, round(seconds * 1000))}ms"


def exposition_of(samples: Iterable[VectorSample]) -> Exposition:
    """Rebuild a /metrics-like exposition from instant-vector samples (`__name__` kept), each
    name as the engine serves it (an escaped `sglang_` read as `sglang:`).

    Every name becomes an untyped family of its own, as in a body without `# TYPE` lines; the
    reading then finds counters by `_total` and histograms by `_bucket`, `_count` and `_sum`.
    `_created` series (prometheus_client's creation times) are left out, as the parser does.
    """
    families: dict[str, list[Sample]] = {}
    for sample in samples:
        name = served_name(sample.label("__name__"))
        if not name or name.endswith(_CREATED):
            continue
        labels = tuple(pair for pair in sample.labels if pair[0] != "__name__")
        families.setdefault(name, []).append(Sample(name, labels, sample.value))
    return Exposition(
        MappingProxyType(
            {name: Family(name, "untyped", tuple(found)) for name, found in families.items()}
        )
    )


def _names(key: str) -> list[str]:
    """Every engine's names for a canonical key, newest first within each engine."""
    return [
        name
        for catalogue in CATALOGUES.values()
        if key in catalogue.by_key
        for name in catalogue.by_key[key].names
    ]


def gauge_selector() -> str:
    """The instant-vector selector of every gauge and info series the fleet's gauges need, of
    every engine, in either spelling."""
    names = [name for key in GAUGE_KEYS for name in _names(key)]
    return f'{{__name__=~"{names_regex(names)}"}}'


@dataclass(frozen=True, slots=True)
class FleetQueries:
    """The PromQL a poll runs, built once from the labels, the window and the percentiles."""

    replica_labels: tuple[str, ...]
    model_label: str
    window_s: float
    percentiles: Mapping[str, float]

    @property
    def group(self) -> str:
        """The `by (...)` labels of a replica."""
        return ", ".join((*self.replica_labels, self.model_label))

    def _last_seen(self, names: Iterable[str]) -> str:
        """The newest sample within the window of each series of these names."""
        span = promql_duration(self.window_s)
        return " or ".join(
            each_spelling(name, lambda spelled: f"last_over_time({spelled}[{span}])")
            for name in names
        )

    def discovery(self, engine: Engine) -> str:
        """The engine's replicas with a sample within the window (a down one included)."""
        return f"group by ({self.group}) ({self._last_seen([DISCOVERY_NAMES[engine]])})"

    def up(self) -> str:
        """Whether each replica's target answered its last scrape."""
        by = ", ".join(self.replica_labels)
        seen = self._last_seen(DISCOVERY_NAMES.values())
        return f"max by ({by}) (up) and on ({by}) group by ({by}) ({seen})"

    def buckets(self, key: str) -> str:
        """A histogram's bucket increases over the window per replica: each engine's, newest
        name first, joined with `or` (a replica is one engine's, so they never overlap)."""
        span = promql_duration(self.window_s)
        parts = [
            f"sum by ({self.group}, le) "
            f"({each_spelling(name + '_bucket', lambda b: f'increase({b}[{span}])')})"
            for name in _names(key)
        ]
        return " or ".join(f"({part})" for part in parts) if len(parts) > 1 else parts[0]

    def quantile(self, key: str) -> str:
        """Prometheus's own histogram_quantile over those increases, at the SLO's percentile."""
        return f"histogram_quantile({self.percentiles[key] / 100:g}, {self.buckets(key)})"

    @property
    def resolution_s(self) -> float:
        """The step of the oldest-sample subquery: a hundredth of the window, a second at least."""
        return max(1.0, self.window_s / 100)

    def first_sample(self) -> str:
        """Each replica's oldest sample within the window, as Unix time (to `resolution_s`)."""
        span = promql_duration(self.window_s)
        step = promql_duration(self.resolution_s)
        stamps = " or ".join(
            each_spelling(name, lambda spelled: f"timestamp({spelled})")
            for name in DISCOVERY_NAMES.values()
        )
        return f"min by ({self.group}) (min_over_time(({stamps})[{span}:{step}]))"

    def rate(self, key: str) -> str:
        """A counter's per-second rate over the window per replica, of every engine, summed
        over its series (vLLM's engines, SGLang's streaming and not)."""
        span = promql_duration(self.window_s)
        rates = " or ".join(
            each_spelling(f"{name}_total", lambda spelled: f"rate({spelled}[{span}])")
            for name in _names(key)
        )
        return f"sum by ({self.group}) ({rates})"


Query = tuple[str, str]
"""(what the figures call it, the PromQL)."""


class PrometheusFleet:
    """Polls a Prometheus server for every vLLM and SGLang replica it scrapes; IO through the
    client."""

    def __init__(
        self,
        client: PrometheusClient,
        *,
        window_s: float,
        ttft_percentile: float,
        itl_percentile: float,
        replica_labels: tuple[str, ...] = ("job", "instance"),
        model_label: str = "model_name",
        direct_url: Callable[[ReplicaKey], str | None] | None = None,
        wall_clock: Callable[[], float] = time.time,
        workers: int = 4,
    ) -> None:
        self.client = client
        self.queries = FleetQueries(
            replica_labels,
            model_label,
            window_s,
            MappingProxyType({"ttft": ttft_percentile, "itl": itl_percentile}),
        )
        self._direct_url = direct_url
        self._wall_clock = wall_clock
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="slotop-promql")

    @property
    def source(self) -> str:
        """Where the figures come from, in words."""
        return f"Prometheus {self.client.base_url}"

    def close(self) -> None:
        """Stop the query threads and close the client."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    def _key(self, sample: VectorSample) -> ReplicaKey:
        q = self.queries
        labels = tuple((name, sample.label(name)) for name in (*q.replica_labels, q.model_label))
        key = ReplicaKey(labels)
        url = self._direct_url(key) if self._direct_url is not None else None
        return replace(key, url=url) if url else key

    def _run(self, queries: list[Query], at_s: float) -> dict[str, QueryAnswer | PrometheusError]:
        futures = {what: self._pool.submit(self.client.instant, q, at_s) for what, q in queries}
        answers: dict[str, QueryAnswer | PrometheusError] = {}
        for what, future in futures.items():
            try:
                answers[what] = future.result()
            except PrometheusError as exc:
                answers[what] = exc
        return answers

    def poll(self) -> FleetPoll:
        """Run every query at one instant and build each replica's figures.

        Raises PrometheusError when the server cannot be reached or the discovery fails.
        """
        at_s = self._wall_clock()
        q = self.queries
        queries: list[Query] = [(f"discovery:{engine}", q.discovery(engine)) for engine in ENGINES]
        queries += [("up", q.up()), ("gauges", gauge_selector())]
        for key in ("ttft", "itl"):
            queries += [(f"{key}_buckets", q.buckets(key)), (f"{key}_quantile", q.quantile(key))]
        queries += [
            ("generation_tokens_per_s", q.rate("generation_tokens")),
            ("preemptions_per_s", q.rate("preemptions")),
            ("first_sample", q.first_sample()),
        ]
        answers = self._run(queries, at_s)
        engines: dict[ReplicaKey, Engine] = {}
        for engine in reversed(ENGINES):  # a replica both engines claim is the first's
            found = answers[f"discovery:{engine}"]
            if isinstance(found, PrometheusError):
                raise found
            engines.update((self._key(sample), engine) for sample in found.samples)
        failures = [a for a in answers.values() if isinstance(a, PrometheusError)]
        if len(failures) == len(answers) - len(ENGINES) and all(
            isinstance(a, PrometheusUnavailable) for a in failures
        ):
            raise failures[0]
        keys = sorted(engines, key=_order)
        figures = {key: self._figures_of(key, engines[key], answers, at_s) for key in keys}
        good = [a for a in answers.values() if isinstance(a, QueryAnswer)]
        return FleetPoll(
            taken_at_s=at_s,
            replicas=tuple(figures.values()),
            source=self.source,
            warnings=tuple(dict.fromkeys(w for a in good for w in a.warnings)),
            query_s=sum(a.elapsed_s for a in good),
            queries=len(answers),
        )

    def _match(self, key: ReplicaKey, sample: VectorSample, *, exact: bool = False) -> bool:
        """Whether a sample is the replica's: its replica labels agree, and its model label too
        (a series without one, such as `vllm:cache_config_info` or `up`, belongs to every model
        of its replica unless `exact`)."""
        model_label = self.queries.model_label
        for name, value in key.labels:
            found = sample.label(name)
            if found != value and not (name == model_label and found == "" and not exact):
                return False
        return True

    def _value_of(self, key: ReplicaKey, samples: Iterable[VectorSample]) -> float | None:
        """The value of the replica's one sample in an aggregated answer, None when absent."""
        for sample in samples:
            if self._match(key, sample, exact=True):
                return sample.value if math.isfinite(sample.value) else None
        return None

    def _covered_s(
        self, key: ReplicaKey, answers: Mapping[str, QueryAnswer | PrometheusError], at_s: float
    ) -> float | None:
        """The span the replica's samples cover when less than the window (None when whole, or
        unknown): its oldest sample in the window is later than the window's start by more than
        the subquery's steps can blur."""
        found = answers.get("first_sample")
        if not isinstance(found, QueryAnswer):
            return None
        first = self._value_of(key, found.samples)
        if first is None:
            return None
        covered = at_s - first
        q = self.queries
        return covered if covered < q.window_s - 2 * q.resolution_s else None

    def _figures_of(
        self,
        key: ReplicaKey,
        engine: Engine,
        answers: Mapping[str, QueryAnswer | PrometheusError],
        at_s: float,
    ) -> ReplicaFigures:
        unread: list[tuple[str, str]] = []
        covered_s = self._covered_s(key, answers, at_s)
        values: dict[str, object] = {}

        def answer(what: str, *fields: str) -> QueryAnswer | None:
            got = answers[what]
            if isinstance(got, PrometheusError):
                unread.extend((name, str(got)) for name in fields)
                return None
            return got

        up = answer("up", "up")
        if up is not None:
            ups = [s.value for s in up.samples if self._match(key, s)]
            values["up"] = None if not ups else max(ups) >= 1
        gauges = answer("gauges", "running", "waiting", "kv_usage_ratio")
        if gauges is not None:
            mine = [s for s in gauges.samples if self._match(key, s)]
            reading = read_exposition(exposition_of(mine), engine)
            counts = request_counts(reading)
            values["running"] = counts.running
            values["waiting"] = counts.waiting
            values["kv_usage_ratio"] = kv_cache_state(reading).usage_ratio
        for name, counter in (
            ("generation_tokens_per_s", "generation_tokens"),
            ("preemptions_per_s", "preemptions"),
        ):
            rate = answer(name, name)
            if rate is not None:
                value = self._value_of(key, rate.samples)
                if value is None and CATALOGUES[engine].by_key[counter].zero_when_absent:
                    value = 0.0  # a counter the engine shows only once it has counted
                if value is not None and covered_s is not None:
                    # rate() divided the increase by the whole window; the data spans less.
                    value = value * self.queries.window_s / covered_s if covered_s > 0 else None
                values[name] = value
        for latency in ("ttft", "itl"):
            buckets = answer(f"{latency}_buckets", latency)
            quantile = answer(f"{latency}_quantile", latency) if buckets is not None else None
            if buckets is not None and quantile is not None:
                values[latency] = self._latency(key, latency, buckets, quantile)
        if values.get("up") is False:
            # Its series went stale at the failed scrape: what remains describes the past.
            down = "Prometheus cannot scrape it (up = 0)"
            unread += [(name, down) for name in ALL_FIELDS if name != "up"]
            values = {"up": False}
        return ReplicaFigures(
            key=key,
            model=key_model(key, self.queries.model_label),
            window_s=self.queries.window_s,
            engine=engine,
            ttft=_latency_or_none(values.get("ttft")),
            itl=_latency_or_none(values.get("itl")),
            generation_tokens_per_s=_float_or_none(values.get("generation_tokens_per_s")),
            preemptions_per_s=_float_or_none(values.get("preemptions_per_s")),
            running=_float_or_none(values.get("running")),
            waiting=_float_or_none(values.get("waiting")),
            kv_usage_ratio=_float_or_none(values.get("kv_usage_ratio")),
            up=_bool_or_none(values.get("up")),
            unread=tuple(unread),
            covered_s=covered_s if values.get("up") is not False else None,
        )

    def _latency(
        self, key: ReplicaKey, latency: str, buckets: QueryAnswer, quantile: QueryAnswer
    ) -> LatencyFigure | None:
        """Prometheus's quantile, placed in the bucket of the increases it was computed from."""
        found: list[Bucket] = []
        for sample in buckets.samples:
            if self._match(key, sample):
                bound = float(sample.label("le") or "nan")
                if not math.isnan(bound) and math.isfinite(sample.value):
                    found.append((bound, sample.value))
        if not found:
            return None
        percentile = self.queries.percentiles[latency]
        ordered = tuple(sorted(found))
        estimate = quantile_estimate(percentile / 100.0, ordered)
        value = self._value_of(key, quantile.samples)
        if estimate is not None and value is not None:
            # Prometheus's value, in the bucket slotop's identical rules place the rank in.
            inside = (
                estimate.bucket_lower - _BUCKET_BOUND_TOLERANCE
                <= value
                <= estimate.bucket_upper + _BUCKET_BOUND_TOLERANCE
            )
            if inside:
                estimate = replace(estimate, value=value)
        return LatencyFigure(percentile, ordered, estimate)


def _float_or_none(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _bool_or_none(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _latency_or_none(value: object) -> LatencyFigure | None:
    return value if isinstance(value, LatencyFigure) else None


def key_model(key: ReplicaKey, model_label: str) -> str:
    """The model a replica key names ("" when its series carry no model label)."""
    return key.label(model_label)


def _order(key: ReplicaKey) -> tuple[tuple[str, str], ...]:
    return key.labels
