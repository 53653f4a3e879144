"""Families built by hand the way SGLang's multiprocess registry shows them.

SGLang runs prometheus_client in multiprocess mode: no `_created` samples, a labelled series
appears only once something set it, a histogram lists its `_sum`, then its buckets, then its
`_count`. These helpers build such families from plain values (`generate_latest` sorts the labels).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Mapping

from prometheus_client.core import Metric
from prometheus_client.utils import floatToGoString

from slotop.sim.sglang.families import BY_NAME

_go_float: Callable[[float], str] = floatToGoString
"""A bucket bound as prometheus_client writes a float: `100.0`, `1e+06`, `+Inf`."""

Labels = Mapping[str, str]


def family(name: str) -> Metric:
    """An empty family named and described as SGLang names and describes it."""
    spec = BY_NAME[name]
    return Metric(name, spec.help, spec.kind)


def add_value(metric: Metric, labels: Labels, value: float) -> None:
    """One gauge or counter sample (a counter's sample name gains `_total`)."""
    suffix = "_total" if metric.type == "counter" else ""
    metric.add_sample(metric.name + suffix, dict(labels), float(value))


class Histogram:
    """One histogram series: cumulative counts over fixed bounds, a sum; observed one or n at a time."""

    __slots__ = ("_bounds", "_counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    @property
    def count(self) -> int:
        """Observations so far."""
        return sum(self._counts)

    def observe(self, value: float) -> None:
        """Count one observation."""
        self._counts[bisect.bisect_left(self._bounds, value)] += 1
        self.sum += value

    def observe_many(self, value: float, times: int, total: float) -> None:
        """Count `times` observations of `value` that add `total` to the sum (SGLang's batch
        observe of inter-token latency: n tokens of one interval as n observations of interval/n)."""
        self._counts[bisect.bisect_left(self._bounds, value)] += times
        self.sum += total

    def add_to(self, metric: Metric, labels: Labels) -> None:
        """Append this series' `_sum`, buckets and `_count` to `metric`."""
        name = metric.name
        metric.add_sample(name + "_sum", dict(labels), self.sum)
        cumulative = 0
        for bound, count in zip(self._bounds, self._counts, strict=False):
            cumulative += count
            metric.add_sample(
                name + "_bucket", {**labels, "le": _go_float(bound)}, float(cumulative)
            )
        cumulative += self._counts[-1]
        metric.add_sample(name + "_bucket", {**labels, "le": "+Inf"}, float(cumulative))
        metric.add_sample(name + "_count", dict(labels), float(cumulative))


def histogram_family(name: str, series: Iterable[tuple[Labels, Histogram]]) -> Metric | None:
    """A histogram family from its series; None when it has none yet (SGLang shows no family)."""
    metric = family(name)
    for labels, histogram in series:
        histogram.add_to(metric, labels)
    return metric if metric.samples else None


def value_family(name: str, series: Iterable[tuple[Labels, float]]) -> Metric | None:
    """A gauge or counter family from its series; None when it has none yet."""
    metric = family(name)
    for labels, value in series:
        add_value(metric, labels, value)
    return metric if metric.samples else None
