"""The names a Prometheus server keeps an engine's metrics under: as served, or escaped.

SGLang 0.5.23's `/metrics` (prometheus_client 0.26) answers a scraper that asks for OpenMetrics
1.0, as Prometheus 2 does first, with its names escaped (`escaping=underscores`):
`sglang:time_to_first_token_seconds` is stored as `sglang_time_to_first_token_seconds`. A
Prometheus 3, or one scraping the text format, keeps the colon. vLLM 0.32's answers the text
format whatever is asked, so its names stay as served; another version might not. slotop's
queries match both spellings for either engine, and what comes back is read under the engine's
own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from slotop.collectors.engines import CATALOGUES

_ESCAPED_PREFIXES: tuple[tuple[str, str], ...] = tuple(
    (catalogue.prefix.replace(":", "_"), catalogue.prefix)
    for catalogue in CATALOGUES.values()
    if ":" in catalogue.prefix
)


def spellings(name: str) -> tuple[str, ...]:
    """The name as served and, where it holds a colon, as escaped: `sglang:x`, `sglang_x`."""
    return tuple(dict.fromkeys((name, name.replace(":", "_"))))


def each_spelling(name: str, query: Callable[[str], str]) -> str:
    """`query` of each spelling of a name, joined with `or`: where Prometheus holds a series
    under both (its scrape format changed within the window), the served spelling's is kept,
    where a function of both (which drops the name) would fail on a duplicate label set."""
    return " or ".join(query(spelled) for spelled in spellings(name))


def either_spelling(name: str) -> str:
    """A regex (for `__name__=~`) matching a name as served and as escaped: `sglang[:_]x`."""
    return name.replace(".", "\\\\.").replace(":", "[:_]")


def names_regex(names: Iterable[str]) -> str:
    """A `__name__=~` regex matching exactly these names, each in either spelling (PromQL
    anchors it)."""
    return "|".join(dict.fromkeys(either_spelling(name) for name in names))


def served_name(stored: str) -> str:
    """The name as the engine serves it: an escaped engine prefix (`sglang_`, `vllm_`) gets its
    colon back; any other name is left as it is."""
    for escaped, prefix in _ESCAPED_PREFIXES:
        if stored.startswith(escaped):
            return prefix + stored[len(escaped) :]
    return stored
