"""One replica read through Prometheus, shaped as a replica's own endpoints for a ReplicaMonitor.

`metrics_text` asks Prometheus for the replica's newest `vllm:` samples (and its process start)
in one instant query and writes them back as a /metrics body, so the monitor, its window and its
quantiles do the rest exactly as for a direct scrape: the dashboard's panes need no other source.
Health is Prometheus's `up` for the target. The data is as old as Prometheus's last scrape of it,
so short windows move in steps of the server's scrape interval.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from slotop.collectors.errors import ScrapeError
from slotop.collectors.fleet import ReplicaKey
from slotop.collectors.prometheus import PrometheusClient, PrometheusError, VectorSample
from slotop.collectors.replica import Health, Identity, Loads

_CREATED = "_created"
_PROCESS_START = "process_start_time_seconds"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def exposition_text(samples: Iterable[VectorSample]) -> str:
    """Write instant-vector samples as Prometheus text exposition lines, without `# TYPE`.

    `_created` series are left out; the reader finds counters by `_total` and histograms by
    their `_bucket`, `_count` and `_sum` names, as in a body without type lines.
    """
    lines = []
    for sample in sorted(samples, key=lambda s: s.labels):
        name = sample.label("__name__")
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
        selector = f'{{__name__=~"vllm:.+|{_PROCESS_START}", {self._matchers(model=False)}}}'
        try:
            answer = self.client.instant(selector)
        except PrometheusError as exc:
            raise ScrapeError(str(exc)) from exc
        model = self.key.label(self.model_label)
        mine = [
            sample for sample in answer.samples if sample.label(self.model_label) in (model, "")
        ]
        if not any(s.label("__name__").startswith("vllm:") for s in mine):
            raise ScrapeError(
                f"Prometheus at {self.client.base_url} holds no fresh vllm: series of "
                f"{self.base_url.split(' via ')[0]}; is its target up?"
            )
        return exposition_text(mine)

    def identity(self) -> Identity:
        """Prometheus does not know the engine's version."""
        return Identity("vllm", None)

    def loads(self) -> Loads:
        """Prometheus holds only what /metrics said."""
        raise ScrapeError(f"{self.base_url} is read through Prometheus: no /v1/loads")

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
