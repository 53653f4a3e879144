"""Which engine a replica runs, told from what it serves, and each engine's catalogue.

A scrape is parsed keeping every engine's families; the engine is the one whose prefix the body's
families carry (vLLM's `vllm:`, SGLang's `sglang:`). A body with both or neither is read as vLLM
unless the operator names the engine (`--engine`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import get_args

from slotop.collectors.names import VLLM, Catalogue, Engine
from slotop.collectors.names_sglang import SGLANG

ENGINES: tuple[Engine, ...] = get_args(Engine)

CATALOGUES: Mapping[Engine, Catalogue] = MappingProxyType({"vllm": VLLM, "sglang": SGLANG})

SCRAPED_PREFIXES: tuple[str, ...] = tuple(
    dict.fromkeys(p for c in CATALOGUES.values() for p in c.scraped_prefixes)
)
"""What a scrape keeps: every engine's families, and the few names outside their prefixes."""

READ_SAMPLES: frozenset[str] = frozenset().union(*(c.read_samples for c in CATALOGUES.values()))
"""The sample names a scrape reads, of every engine."""


def engine_label(engine: Engine) -> str:
    """The engine's name as its project writes it: vLLM, SGLang."""
    return CATALOGUES[engine].label


def parse_engine(text: str) -> Engine:
    """An engine named by the operator (`--engine`, `[replica] engine`), case aside."""
    name = text.strip().lower()
    for engine in ENGINES:
        if name == engine:
            return engine
    raise ValueError(f"engine {text!r}: expected one of {', '.join(ENGINES)}")


def engine_of_names(names: Iterable[str]) -> Engine | None:
    """The engine whose prefix the family names carry; None when neither or both do."""
    found = {
        engine
        for name in names
        for engine, catalogue in CATALOGUES.items()
        if name.startswith(catalogue.prefix)
    }
    return found.pop() if len(found) == 1 else None


def kv_unit(engine: Engine, block_size_tokens: int | None) -> tuple[str, str]:
    """What the engine cuts its KV cache into, one and many: vLLM's blocks; SGLang's pages, which
    are single tokens unless `--page-size` says otherwise."""
    if engine == "sglang":
        return ("token", "tokens") if block_size_tokens in (None, 1) else ("page", "pages")
    return "block", "blocks"


def preemption_words(engine: Engine) -> tuple[str, str]:
    """What the engine calls sending a running request back to wait, short and plural: vLLM
    preempts, SGLang retracts."""
    return ("retract", "retractions") if engine == "sglang" else ("preempt", "preemptions")


def serves(engine: Engine, key: str) -> bool:
    """Whether the engine has a metric for a canonical key at all (SGLang has no prefill or decode
    time per request, for one), as opposed to a replica that lacks one it could have."""
    return key in CATALOGUES[engine].by_key
