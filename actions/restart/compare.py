"""The before/after table of a replica change: latency, goodput, throughput, KV capacity, preemptions.

Each side is the probe's client-side statistics over the dwell and the replica's snapshot at its
end. A row holds both values, the delta (after − before), the ratio (after / before) and a verdict
that knows which way is better; a value either side lacks stays None, never 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from enum import Enum

from slotop import fmt
from slotop.collectors.probe.stats import (
    THROUGHPUT_AGREEMENT_RATIO,
    LatencySummary,
    ProbeStats,
    throughput_disagrees,
    throughput_gap_ratio,
)
from slotop.collectors.snapshot import LatencyQuantiles, Snapshot

DEFAULT_TOLERANCE_RATIO = 0.02
"""Changes within ±2% of the before value count as the same."""


class Better(Enum):
    """Which direction of a metric is an improvement."""

    LOWER = "lower"
    HIGHER = "higher"


class Change(Enum):
    """How the after value compares with the before one (not an SLO verdict)."""

    BETTER = "better"
    WORSE = "worse"
    SAME = "same"


@dataclass(frozen=True, slots=True)
class RunSide:
    """One side of a before/after: a label, the dials it ran with, probe stats and a snapshot."""

    label: str
    flags: tuple[tuple[str, str], ...] = ()
    stats: ProbeStats | None = None
    snapshot: Snapshot | None = None


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One metric before and after, with delta, ratio and verdict; None where a side is silent."""

    key: str
    label: str
    unit: str
    better: Better
    before: float | None
    after: float | None
    delta: float | None
    ratio: float | None
    verdict: Change | None


@dataclass(frozen=True, slots=True)
class Comparison:
    """The before/after table: both sides' labels and dials, the rows, and what to keep in mind."""

    before: RunSide
    after: RunSide
    rows: tuple[ComparisonRow, ...]
    notes: tuple[str, ...] = ()

    def row(self, key: str) -> ComparisonRow | None:
        """The row of one metric key, None when the table has none."""
        return next((row for row in self.rows if row.key == key), None)


def judge_change(
    before: float | None,
    after: float | None,
    better: Better,
    tolerance_ratio: float = DEFAULT_TOLERANCE_RATIO,
) -> Change | None:
    """Better, worse or the same (within the tolerance of the before value); None if one is missing."""
    if before is None or after is None:
        return None
    delta = after - before
    if abs(delta) <= tolerance_ratio * abs(before):
        return Change.SAME
    improved = delta < 0 if better is Better.LOWER else delta > 0
    return Change.BETTER if improved else Change.WORSE


def make_row(
    key: str,
    label: str,
    unit: str,
    better: Better,
    before: float | None,
    after: float | None,
    tolerance_ratio: float = DEFAULT_TOLERANCE_RATIO,
) -> ComparisonRow:
    """One row: delta after − before, ratio after / before (None when before is 0)."""
    both = before is not None and after is not None
    return ComparisonRow(
        key=key,
        label=label,
        unit=unit,
        better=better,
        before=before,
        after=after,
        delta=after - before if both and after is not None and before is not None else None,
        ratio=after / before if both and before and after is not None else None,
        verdict=judge_change(before, after, better, tolerance_ratio),
    )


def _client_latency(summary: LatencySummary, percentile: float) -> float | None:
    try:
        return summary.at(percentile)
    except KeyError:
        return None


def _server_latency(quantiles: LatencyQuantiles, percentile: float) -> float | None:
    estimate = quantiles.at(percentile)
    return estimate.value if estimate is not None else None


def _label(percentile: float) -> str:
    return f"p{percentile:g}"


Getter = Callable[[RunSide], float | None]


def _stats(read: Callable[[ProbeStats], float | None]) -> Getter:
    return lambda side: read(side.stats) if side.stats is not None else None


def _snap(read: Callable[[Snapshot], float | None]) -> Getter:
    return lambda side: read(side.snapshot) if side.snapshot is not None else None


def _client_getter(attr: str, percentile: float) -> Getter:
    def read(stats: ProbeStats) -> float | None:
        summary: LatencySummary = getattr(stats, attr)
        return _client_latency(summary, percentile)

    return _stats(read)


def _server_getter(attr: str, percentile: float) -> Getter:
    def read(snapshot: Snapshot) -> float | None:
        quantiles: LatencyQuantiles = getattr(snapshot.window, attr)
        return _server_latency(quantiles, percentile)

    return _snap(read)


def _goodput_ratio(stats: ProbeStats) -> float | None:
    return stats.goodput.ratio if stats.goodput is not None else None


def _goodput_rate(stats: ProbeStats) -> float | None:
    return stats.goodput.rate_rps if stats.goodput is not None else None


def _int_or_none(value: int | None) -> float | None:
    return float(value) if value is not None else None


def _specs(percentiles: tuple[float, ...]) -> list[tuple[str, str, str, Better, Getter]]:
    """The rows the table holds, in order: key, label, unit, better direction, getter."""
    specs: list[tuple[str, str, str, Better, Getter]] = []
    for name, attr in (("TTFT", "ttft"), ("ITL", "itl")):
        for p in percentiles:
            specs.append(
                (
                    f"{attr}_{_label(p)}_s",
                    f"{name} {_label(p)}",
                    "s",
                    Better.LOWER,
                    _client_getter(attr, p),
                )
            )
    for name, attr in (("TTFT", "ttft_s"), ("ITL", "itl_s")):
        p = percentiles[-1]
        specs.append(
            (
                f"server_{attr[:-2]}_{_label(p)}_s",
                f"{name} {_label(p)} (server)",
                "s",
                Better.LOWER,
                _server_getter(attr, p),
            )
        )
    specs += [
        ("goodput_ratio", "goodput (share)", "ratio", Better.HIGHER, _stats(_goodput_ratio)),
        ("goodput_rps", "goodput", "req/s", Better.HIGHER, _stats(_goodput_rate)),
        (
            "request_rate_rps",
            "requests",
            "req/s",
            Better.HIGHER,
            _stats(lambda s: s.request_rate_rps),
        ),
        (
            "output_tokens_per_s",
            "output tokens",
            "tok/s",
            Better.HIGHER,
            _stats(lambda s: s.output_tokens_per_s),
        ),
        (
            "requests_failed",
            "failed requests",
            "count",
            Better.LOWER,
            _stats(lambda s: float(s.requests_failed)),
        ),
        (
            "kv_blocks_total",
            "KV blocks",
            "blocks",
            Better.HIGHER,
            _snap(lambda s: _int_or_none(s.kv.blocks_total)),
        ),
        (
            "kv_size_tokens",
            "KV tokens",
            "tokens",
            Better.HIGHER,
            _snap(lambda s: _int_or_none(s.kv.size_tokens)),
        ),
        (
            "kv_max_concurrency",
            "seqs at max context",
            "seqs",
            Better.HIGHER,
            _snap(lambda s: s.kv.max_concurrency),
        ),
        (
            "preemptions",
            "preemptions",
            "count",
            Better.LOWER,
            _snap(lambda s: s.window.preemptions),
        ),
        (
            "preemptions_per_s",
            "preemption rate",
            "/s",
            Better.LOWER,
            _snap(lambda s: s.window.preemptions_per_s),
        ),
    ]
    return specs


def _notes(before: RunSide, after: RunSide) -> tuple[str, ...]:
    notes = []
    if before.stats is not None and after.stats is not None:
        spans = (before.stats.duration_s, after.stats.duration_s)
        if min(spans) > 0 and max(spans) / min(spans) > 1.2:
            notes.append(
                f"the dwells differ ({spans[0]:.0f} s vs {spans[1]:.0f} s): "
                "counts are not comparable, rates are"
            )
        counts = (before.stats.requests_ok, after.stats.requests_ok)
        if min(counts) < 100:
            notes.append(
                f"few requests ({counts[0]} and {counts[1]}): p99 rests on a handful of samples"
            )
    for side in (before, after):
        notes += _side_notes(side)
    if before.stats is None or after.stats is None:
        notes.append("no probe statistics on one side: client-side rows are N/A")
    if before.snapshot is None or after.snapshot is None:
        notes.append("no replica snapshot on one side: server and KV rows are N/A")
    return tuple(notes)


def _side_notes(side: RunSide) -> list[str]:
    """What to keep in mind about one side: requests cut by the wait, token rates that disagree."""
    stats = side.stats
    notes: list[str] = []
    if stats is None:
        return notes
    if stats.requests_cut:
        notes.append(
            f"{side.label}: {stats.requests_cut} requests still streamed when the wait past the "
            "dwell ran out; their latencies are left out, and their tokens after it"
        )
    server = side.snapshot.window.generation_tokens_per_s if side.snapshot is not None else None
    if throughput_disagrees(stats.output_tokens_per_s, server):
        gap = throughput_gap_ratio(stats.output_tokens_per_s, server)
        notes.append(
            f"{side.label}: the probe's {fmt.number(stats.output_tokens_per_s, 1)} tok/s and the "
            f"replica's {fmt.number(server, 1)} tok/s differ by {fmt.fixed(gap, '+.0%')} (more "
            f"than {THROUGHPUT_AGREEMENT_RATIO:.0%}): other clients share the replica, or its "
            "counters missed the span"
        )
    return notes


def compare_runs(
    before: RunSide,
    after: RunSide,
    *,
    percentiles: tuple[float, ...] = (50.0, 99.0),
    tolerance_ratio: float = DEFAULT_TOLERANCE_RATIO,
) -> Comparison:
    """Build the before/after table; client latencies need the percentiles the stats computed."""
    rows = tuple(
        make_row(key, label, unit, better, get(before), get(after), tolerance_ratio)
        for key, label, unit, better, get in _specs(percentiles)
    )
    return Comparison(before, after, rows, _notes(before, after))


def format_value(value: float | None, unit: str) -> str:
    """A value in its unit for the table: seconds as ms, ratios as percent, counts whole."""
    if unit == "s":
        return fmt.millis(value, ",.1f", " ms")
    if unit == "ratio":
        return fmt.percent(value)
    if unit in ("count", "blocks", "tokens"):
        return fmt.number(value)
    if unit == "seqs":
        return fmt.number(value, 1)
    return fmt.number(value, 2 if unit in ("req/s", "/s") else 1, f" {unit}")


def _format_delta(row: ComparisonRow) -> str:
    if row.delta is None:
        return fmt.NA
    if row.unit == "ratio":
        return ("+" if row.delta >= 0 else "−") + f"{abs(row.delta) * 100:.1f} pt"
    text = format_value(abs(row.delta), row.unit)
    return ("+" if row.delta >= 0 else "−") + text


def _flags(side: RunSide) -> str:
    return " ".join(f"{k}={v}" for k, v in side.flags)


def format_comparison_text(comparison: Comparison) -> str:
    """The table as fixed-width text: metric, before, after, delta, ratio, verdict."""
    before, after = comparison.before, comparison.after
    lines = [f"before: {before.label} {_flags(before)}".rstrip()]
    lines.append(f"after:  {after.label} {_flags(after)}".rstrip())
    table = [("metric", "before", "after", "delta", "ratio", "")]
    for row in comparison.rows:
        table.append(
            (
                row.label,
                format_value(row.before, row.unit),
                format_value(row.after, row.unit),
                _format_delta(row),
                fmt.NA if row.ratio is None else f"×{row.ratio:.2f}",
                row.verdict.value if row.verdict is not None else "",
            )
        )
    widths = [max(len(cells[i]) for cells in table) for i in range(6)]
    lines.append("")
    for cells in table:
        first = cells[0].ljust(widths[0])
        middle = "  ".join(c.rjust(w) for c, w in zip(cells[1:5], widths[1:5], strict=True))
        lines.append(f"  {first}  {middle}  {cells[5]}".rstrip())
    lines += [f"  note: {note}" for note in comparison.notes]
    return "\n".join(lines) + "\n"


def comparison_to_json(comparison: Comparison) -> dict[str, object]:
    """The table as JSON-ready data: each side's label and dials, every row, the notes."""

    def side(run: RunSide) -> dict[str, object]:
        return {"label": run.label, "flags": dict(run.flags)}

    rows = []
    for row in comparison.rows:
        data = asdict(row)
        data["better"] = row.better.value
        data["verdict"] = row.verdict.value if row.verdict is not None else None
        rows.append(data)
    return {
        "before": side(comparison.before),
        "after": side(comparison.after),
        "rows": rows,
        "notes": list(comparison.notes),
    }
