"""A replica that answers from real /metrics captures, for monitors driven on a made-up clock."""

from __future__ import annotations

from slotop.collectors.errors import ScrapeError
from slotop.collectors.replica import Health, Identity, Loads
from tests.support.paths import CAPTURES


class CapturedReplica:
    """Answers each scrape with the next capture named (the last repeats); healthy, vLLM 0.32."""

    base_url = "http://127.0.0.1:9"

    def __init__(self, *names: str) -> None:
        self._texts = [(CAPTURES / name).read_text(encoding="utf-8") for name in names]
        self.scrapes = 0

    def metrics_text(self) -> str:
        text = self._texts[min(self.scrapes, len(self._texts) - 1)]
        self.scrapes += 1
        return text

    def identity(self) -> Identity:
        return Identity("vllm", "0.32.0")

    def loads(self) -> Loads:
        raise ScrapeError("vLLM has no /v1/loads")

    def served_models(self) -> tuple[str, ...]:
        return ("tiny-llama",)

    def health(self) -> Health:
        return Health(True)
