"""One replica read through Prometheus, shaped as a replica's own endpoints for a ReplicaMonitor.

`metrics_text` asks Prometheus for the replica's newest `vllm:` or `sglang:` samples (in either
spelling Prometheus keeps them under, `prometheus_names`) and its process start in one instant
query and writes them back as a /metrics body under the engine's own names, so the monitor, its
window and its quantiles do the rest exactly as for a direct scrape: the dashboard's panes need
no other source. The engine is the one whose families the replica's series carry.
Health is Prometheus's `up` for the target. The data is as old as Prometheus's last scrape of it,
so short windows move in steps of the server's scrape interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from slotop.collectors.engines import CATALOGUES, engine_of_names
from slotop.collectors.errors import EndpointMissingError, ScrapeError
from slotop.collectors.fleet import ReplicaKey
from slotop.collectors.names import Engine
from slotop.collectors.prometheus import PrometheusClient, PrometheusError, VectorSample
from slotop.collectors.prometheus_names import either_spelling, served_name
from slotop.collectors.replica import Health, Identity, Loads

_CREATED = "_created"
_PROCESS_START = "process_start_time_seconds"
_ENGINE_NAMES = "|".join(
    either_spelling(catalogue.prefix) + ".+" for catalogue in CATALOGUES.values()
)
"""Every engine's families, in either spelling: `vllm[:_].+|sglang[:_].+`."""


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def exposition_text(samples: Iterable[VectorSample]) -> str:
    """Write instant-vector samples as Prometheus text exposition lines, without `# TYPE`, each
    name as the engine serves it (an escaped `sglang_` written `sglang:`).

    `_created` series are left out; the reader finds counters by `_total` and histograms by
    their `_bucket`, `_count` and `_sum` names, as in a body without type lines.
    """
    lines = []
    for sample in sorted(samples, key=lambda s: s.labels):
        name = served_name(sample.label("__name__"))
        if not name or name.endswith(_CREATED):
            continue
        labels = ",".join(
            f'{key}="{_escaped(value)}"' for key, value in sample.labels if key != "__name__"
        )
        lines.append(f"{name}{{{labels}}} {_number(sample.value)}")
    return "\n".join(lines) + "\n"


class PrometheusReplica:
    """The ReplicaEndpoints of one fleet row, answered by Prometheus instead of the replica."""

    def __init__(
        self,
        client: PrometheusClient,
        key: ReplicaKey,
        *,
        model_label: str = "model_name",
        name: str | None = None,
    ) -> None:
        self.client = client
        self.key = key
        self.model_label = model_label
        shown = name or "/".join(value for _, value in key.labels if value)
        self.base_url = f"{shown} via {client.base_url}"

    def _matchers(self, *, model: bool) -> str:
        return ", ".join(
            f'{name}="{_escaped(value)}"'
            for name, value in self.key.labels
            if model or name != self.model_label
        )

    def metrics_text(self) -> str:
        """The replica's newest samples as a /metrics body; ScrapeError when Prometheus fails
        or holds none of its series (a target that is down has none fresh)."""
        selector = (
            f'{{__name__=~"{_ENGINE_NAMES}|{_PROCESS_START}", {self._matchers(model=False)}}}'
        )
        try:
            answer = self.client.instant(selector)
        except PrometheusError as exc:
            raise ScrapeError(str(exc)) from exc
        model = self.key.label(self.model_label)
        mine = [
            sample for sample in answer.samples if sample.label(self.model_label) in (model, "")
        ]
        if self._engine_of(mine) is None:
            raise ScrapeError(
                f"Prometheus at {self.client.base_url} holds no fresh vllm: or sglang: series "
                f"of {self.base_url.split(' via ')[0]}; is its target up?"
            )
        return exposition_text(mine)

    @staticmethod
    def _engine_of(samples: list[VectorSample]) -> Engine | None:
        """The engine whose families the samples carry; None when neither's (or both's)."""
        return engine_of_names({served_name(s.label("__name__")) for s in samples})

    def identity(self) -> Identity:
        """The engine whose families Prometheus holds of the replica; Prometheus does not know
        its version."""
        selector = f'{{__name__=~"{_ENGINE_NAMES}", {self._matchers(model=True)}}}'
        try:
            answer = self.client.instant(f"group by (__name__) ({selector})")
        except PrometheusError as exc:
            raise ScrapeError(str(exc)) from exc
        return Identity(self._engine_of(list(answer.samples)), None)

    def loads(self) -> Loads:
        """Prometheus holds only what /metrics said: never an SGLang replica's /v1/loads, so
        the monitor notes once that its running, queued and KV gauges lag."""
        raise EndpointMissingError(f"{self.base_url} is read through Prometheus: no /v1/loads")

    def served_models(self) -> tuple[str, ...]:
        """The model the row's label names."""
        model = self.key.label(self.model_label)
        return (model,) if model else ()

    def health(self) -> Health:
        """Whether Prometheus's last scrape of the target succeeded (`up`)."""
        query = f"max(up{{{self._matchers(model=False)}}})"
        try:
            answer = self.client.instant(query)
        except PrometheusError as exc:
            return Health(False, f"cannot ask Prometheus: {exc}")
        if not answer.samples:
            return Health(False, "Prometheus has no target with these labels (no up series)")
        if answer.samples[0].value >= 1:
            return Health(True, None)
        return Health(False, "Prometheus's last scrape of it failed (up = 0)")
