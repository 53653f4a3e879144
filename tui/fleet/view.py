"""The fleet table's cells: what each column shows for a replica or a model, as Rich text.

Pure functions of a row, so the screen updates only the cells whose text changed. Stale values
are dim; a verdict is coloured as on the dashboard's SLO pane; a missing value is N/A. A replica
named by its URL (scraped directly) shows as host:port; its dashboard's header names the URL.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from rich.text import Text

from slotop import fmt
from slotop.actions.fleet.table import FleetTable, LatencyCell, ModelRow, ReplicaRow
from slotop.actions.slo import Verdict
from slotop.collectors.histograms import QuantileEstimate
from slotop.tui.panes.slo import VERDICT_STYLE, VERDICT_WORD

NARROW_BELOW = 120
"""Under this many columns the table leaves out the model, the buckets and preemptions."""


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its key, its heading, and whether a narrow screen keeps it."""

    key: str
    heading: str
    narrow: bool


def bucket_words(estimate: QuantileEstimate | None) -> str:
    """The bucket a quantile fell in, in milliseconds ("250–500", ">10,000")."""
    if estimate is None:
        return fmt.NA
    if estimate.at_floor:
        return f"≤{fmt.number(estimate.bucket_upper * 1e3)}"
    if estimate.clamped:
        return f">{fmt.number(estimate.bucket_lower * 1e3)}"
    return f"{_bound_ms(estimate.bucket_lower)}–{_bound_ms(estimate.bucket_upper)}"


def _bound_ms(bound_s: float) -> str:
    """A bucket bound in milliseconds, as few digits as it needs (0, 2.5, 10, 1,000)."""
    millis = bound_s * 1e3
    return f"{millis:,.0f}" if millis == round(millis) else f"{millis:,.3g}"


def short_names(names: Iterable[str]) -> dict[str, str]:
    """Each replica's name as the table shows it: a URL without its scheme or a trailing slash
    (host:port), where that leaves the names apart; any other name as it is."""
    names = list(names)
    shortened = {name: _without_scheme(name) for name in names}
    counts: dict[str, int] = {}
    for short in shortened.values():
        counts[short] = counts.get(short, 0) + 1
    return {name: short if counts[short] == 1 else name for name, short in shortened.items()}


def _without_scheme(name: str) -> str:
    parts = urlsplit(name)
    if not parts.scheme or not parts.netloc or " " in name:
        return name
    rest = name.split("://", 1)[1]
    return rest.rstrip("/") or name


def columns(
    percentiles: tuple[float, float], *, narrow: bool, models: bool = False
) -> tuple[Column, ...]:
    """The columns at this width; the latency headings name the SLO's percentiles. The models'
    table heads its first two columns for what they hold there: the model, how many replicas.
    The state stands by the verdict, before the figures, so no figure's width can push it off
    a narrow screen."""
    ttft, itl = (f"p{p:g}" for p in percentiles)
    every = (
        Column("name", "model" if models else "replica", True),
        Column("model", "replicas" if models else "model", False),
        Column("slo", "SLO", True),
        Column("state", "state", True),
        Column("ttft", f"TTFT {ttft}", True),
        Column("ttft_bucket", "bucket ms", False),
        Column("itl", f"ITL {itl}", True),
        Column("itl_bucket", "bucket ms", False),
        Column("tokens", "out tok/s", True),
        Column("running", "run", True),
        Column("waiting", "wait", True),
        Column("kv", "KV", True),
        Column("preemptions", "preempt/s", False),
    )
    return tuple(column for column in every if column.narrow or not narrow)


def _dim_if(text: str, stale: bool, style: str = "") -> Text:
    return Text(text, style="dim" if stale else style)


def _verdict(verdict: Verdict, *, stale: bool, down: bool) -> Text:
    if down:
        return Text("DOWN", style="bold red")
    if stale:
        return Text("STALE", style="dim")
    return Text(VERDICT_WORD[verdict], style=VERDICT_STYLE[verdict])


def _latency(cell: LatencyCell, stale: bool) -> Text:
    estimate = cell.estimate
    value = fmt.NA if estimate is None else estimate.mark + fmt.ms(estimate.value)
    return _dim_if(value, stale, VERDICT_STYLE[cell.verdict] if cell.estimate else "")


def _state(row: ReplicaRow) -> Text:
    if row.up is False:
        return Text("down (up = 0)", style="bold red")
    words = [flag.kind if flag.on == "ttft" else f"skew {_ON[flag.on]}" for flag in row.flags]
    if row.stale is not None:
        words.insert(0, "stale")
        return Text(", ".join(words), style="dim")
    return Text(", ".join(words) or "up", style="bold yellow" if words else "green")


_ON = {"kv_usage_ratio": "KV", "running": "run", "ttft": "TTFT"}


def _engine_words(engine: str | None) -> str:
    """A row names its engine where it is not vLLM, the one most fleets run."""
    return " (SGLang)" if engine == "sglang" else ""


def replica_cells(row: ReplicaRow, name: str | None = None) -> dict[str, Text]:
    """Every column's text for one replica, named `name` where given (see `short_names`)."""
    old = set(row.stale_fields)

    def dim(text: str, *fields: str) -> Text:
        return _dim_if(text, any(field in old for field in fields))

    latency_stale = bool(old & {"ttft", "itl"})
    return {
        "name": Text(row.name if name is None else name, style="bold" if row.flags else ""),
        "model": Text((row.model or fmt.NA) + _engine_words(row.engine)),
        "slo": _verdict(row.verdict, stale=latency_stale, down=row.up is False),
        "ttft": _latency(row.ttft, "ttft" in old),
        "ttft_bucket": dim(bucket_words(row.ttft.estimate), "ttft"),
        "itl": _latency(row.itl, "itl" in old),
        "itl_bucket": dim(bucket_words(row.itl.estimate), "itl"),
        "tokens": dim(fmt.number(row.generation_tokens_per_s, 1), "generation_tokens_per_s"),
        "running": dim(fmt.number(row.running), "running"),
        "waiting": dim(fmt.number(row.waiting), "waiting"),
        "kv": dim(fmt.percent(row.kv_usage_ratio, 0), "kv_usage_ratio"),
        "preemptions": dim(fmt.number(row.preemptions_per_s, 2), "preemptions_per_s"),
        "state": _state(row),
    }


def model_cells(row: ModelRow) -> dict[str, Text]:
    """Every column's text for one model's row (its replicas merged)."""
    stale = row.fresh == 0
    up = f"{row.up}/{row.replicas} up"
    if row.fresh < row.replicas:
        up += f", {row.replicas - row.fresh} stale"
    if row.flagged:
        up += f", {len(row.flagged)} flagged"
    return {
        "name": Text(f"Σ {row.model or 'model N/A'}{_engine_words(row.engine)}", style="bold"),
        "model": Text(f"{row.replicas} replica{'s' if row.replicas != 1 else ''}"),
        "slo": _verdict(row.verdict, stale=stale, down=False),
        "ttft": _latency(row.ttft, stale),
        "ttft_bucket": _dim_if(bucket_words(row.ttft.estimate), stale),
        "itl": _latency(row.itl, stale),
        "itl_bucket": _dim_if(bucket_words(row.itl.estimate), stale),
        "tokens": _dim_if(fmt.number(row.generation_tokens_per_s, 1), stale),
        "running": _dim_if(fmt.number(row.running), stale),
        "waiting": _dim_if(fmt.number(row.waiting), stale),
        "kv": _dim_if(fmt.percent(row.kv_usage_ratio, 0), stale),
        "preemptions": _dim_if(fmt.number(row.preemptions_per_s, 2), stale),
        "state": Text(up, style="dim" if stale else ""),
    }


def title_line(table: FleetTable | None, now_s: float) -> tuple[str, str]:
    """The title (source, window, counts) and the freshness line with its state class."""
    if table is None:
        return "slotop fleet", "waiting for the first answer…"
    window = f"window {fmt.duration(table.window_s)}" if table.window_s else "window N/A"
    count = len(table.rows)
    title = (
        f"slotop fleet  {table.source}  {window}  {count} replica{'s' if count != 1 else ''}, "
        f"{len(table.models)} model{'s' if len(table.models) != 1 else ''}"
    )
    if table.error is not None:
        return title, f"STALE: {table.error}"
    took = f"{table.queries} queries, {table.query_s * 1e3:.0f} ms" if table.query_s else ""
    age = fmt.duration(max(0.0, now_s - table.taken_at_s))
    return title, f"fresh ({age} ago{', ' + took if took else ''})"


def notes(table: FleetTable | None) -> list[str]:
    """The flagged replicas by name with the reason, the stale ones, and the server's warnings."""
    if table is None:
        return []
    shown = short_names(row.name for row in table.rows)
    lines = [f"{shown[row.name]}: {flag.text}" for row in table.rows for flag in row.flags]
    stale = [row for row in table.rows if row.stale is not None and table.error is None]
    lines += [
        f"{shown[row.name]}: stale ({', '.join(row.stale_fields)}): {row.stale}" for row in stale
    ]
    lines += [
        f"{name}: partial window: the source holds {fmt.duration(covered)} of the "
        f"{fmt.duration(table.window_s)} window; rates are over those {fmt.duration(covered)}"
        for name, covered in [
            *(
                (f"model {row.model or '?'}{_engine_words(row.engine)}", row.covered_s)
                for row in table.models
            ),
            *((shown[row.name], row.covered_s) for row in table.rows),
        ]
        if covered is not None
    ]
    lines += [f"Prometheus warns: {warning}" for warning in table.warnings]
    return lines
