"""A before/after as `slotop demo` showed it after k auto → fp8 at 2 in flight: the table's cells
copied from that screen (the sides' spans as the panel says them now), for tests of the panel's
layout."""

from __future__ import annotations

from slotop.actions.restart.compare import Change
from slotop.actions.restart.live import BeforeAfter
from slotop.actions.restart.table import LEGEND, ComparisonTable, TableRow

_NOISE, _BETTER = Change.WITHIN_NOISE, Change.BETTER


def _row(verdict: Change, *cells: str) -> TableRow:
    return TableRow((*cells, verdict.value), verdict)


_ROWS = (
    _row(_NOISE, "TTFT p50", "22.1 ms", "22.3 ms", "+0.2 ms", "±3.9", "×1.01"),
    _row(_NOISE, "TTFT p99", "32.3 ms", "33.2 ms", "+0.9 ms", "±6.9", "×1.03"),
    _row(_BETTER, "ITL p50", "6.7 ms", "6.6 ms", "+0.0 ms", "±0.0", "×1.00"),
    _row(_NOISE, "ITL p99", "12.1 ms", "12.1 ms", "+0.1 ms", "±0.7", "×1.00"),
    _row(_BETTER, "output tokens", "293.3 tok/s", "294.6 tok/s", "+1.3 tok/s", "±1.3", "×1.00"),
    _row(_NOISE, "requests", "2.35 req/s", "2.40 req/s", "+0.05 req/s", "±0.32", "×1.02"),
    _row(_NOISE, "goodput", "2.35 req/s", "2.40 req/s", "+0.05 req/s", "±0.32", "×1.02"),
    _row(_NOISE, "goodput (share)", "100.0%", "100.0%", "+0.0 pt", "±0.0", "×1.00"),
    _row(_NOISE, "failed requests", "0", "0", "+0", "p 1.00", "N/A"),
    _row(_BETTER, "KV blocks", "27,981", "55,962", "+27,981", "exact", "×2.00"),
    _row(_BETTER, "KV tokens", "447,696", "895,392", "+447,696", "exact", "×2.00"),
    _row(_BETTER, "seqs at max context", "3.4", "6.8", "+3.4", "exact", "×2.00"),
    _row(_NOISE, "preemptions", "0", "0", "+0", "p 1.00", "N/A"),
    _row(_NOISE, "preemption rate", "0.00 /s", "0.00 /s", "+0.00 /s", "p 1.00", "N/A"),
)
DEMO_TABLE = ComparisonTable(
    (
        "before: as it ran kv_cache_dtype=auto max_num_seqs=default max_num_batched_tokens=default"
        "; 61 requests over 13.1 s, 41.3 s into its load",
        "after:  restarted kv_cache_dtype=fp8 max_num_seqs=default max_num_batched_tokens=default"
        "; 58 requests over 12.6 s, 2.2 s into its load (settled after 2.2 s)",
    ),
    _ROWS,
    (
        *LEGEND,
        "note: the spans differ (16 s vs 21 s): counts are not comparable, rates are",
        "note: few requests (38 and 50, under 50): a high percentile rests on a handful of "
        "samples, so its noise is wide",
    ),
)
DEMO_BEFORE_AFTER = BeforeAfter(
    "kv_cache_dtype auto → fp8", "2 in flight", 50, 50, table=DEMO_TABLE
)
