"""The fleet table as JSON-ready data: schema `slotop.fleet/1`, units in keys, null for unknown.

Each latency is the snapshot's latency object (`slotop snapshot --json`) at the SLO's
percentile: the value, the bucket it fell in, the count, and the verdict the bucket alone gives.
docs/schemas.md ("slotop fleet --json") documents the shape; bump SCHEMA when a key changes meaning or goes away.
"""

from __future__ import annotations

from typing import Any

from slotop.actions.fleet.outliers import Flag
from slotop.actions.fleet.table import FleetTable, LatencyCell, ModelRow, ReplicaRow
from slotop.collectors.report import latency_json
from slotop.collectors.snapshot import LatencyQuantiles

SCHEMA = "slotop.fleet/1"


def cell_json(cell: LatencyCell) -> dict[str, Any]:
    """One latency at the SLO's percentile, shaped as `slotop snapshot --json` shapes it."""
    quantiles = LatencyQuantiles(
        percentiles=((cell.percentile, cell.estimate),),
        configured_percentile=cell.percentile,
        count=cell.count,
        mean_s=None,
    )
    data = latency_json(quantiles, cell.target_s)
    del data["mean"]
    return data


def _flag_json(flag: Flag) -> dict[str, Any]:
    return {
        "kind": flag.kind,
        "on": flag.on,
        "value": flag.value,
        "model_median": flag.median,
        "text": flag.text,
    }


def _figures_json(row: ReplicaRow | ModelRow) -> dict[str, Any]:
    return {
        "partial_window": row.covered_s is not None,
        "covered_s": row.covered_s,
        "verdict": row.verdict.value,
        "ttft_s": cell_json(row.ttft),
        "itl_s": cell_json(row.itl),
        "throughput": {
            "generation_tokens_per_s": row.generation_tokens_per_s,
            "preemptions_per_s": row.preemptions_per_s,
        },
        "requests": {"running": row.running, "waiting": row.waiting},
    }


def replica_json(row: ReplicaRow) -> dict[str, Any]:
    """One replica's row."""
    return {
        "name": row.name,
        "labels": dict(row.key.labels),
        "url": row.key.url,
        "model": row.model or None,
        "engine": row.engine,
        "up": row.up,
        "answered": row.answered,
        "stale": row.stale is not None,
        "stale_reason": row.stale,
        "stale_fields": list(row.stale_fields),
        **_figures_json(row),
        "kv": {"usage_ratio": row.kv_usage_ratio},
        "flags": [_flag_json(flag) for flag in row.flags],
    }


def model_json(row: ModelRow) -> dict[str, Any]:
    """One model's row: merged buckets, sums, the mean KV usage."""
    return {
        "model": row.model or None,
        "engine": row.engine,
        "replicas": row.replicas,
        "replicas_fresh": row.fresh,
        "replicas_up": row.up,
        **_figures_json(row),
        "kv": {"usage_ratio_mean": row.kv_usage_ratio},
        "flagged": list(row.flagged),
    }


def fleet_to_json(table: FleetTable, *, mode: str) -> dict[str, Any]:
    """The whole table; `mode` says "prometheus" or "direct". `error` says why the source could
    not be read, or that no replica answered."""
    return {
        "schema": SCHEMA,
        "mode": mode,
        "source": table.source,
        "taken_at_s": table.taken_at_s,
        "window_s": table.window_s,
        "error": table.error or table.unanswered,
        "replicas_answered": sum(1 for row in table.rows if row.answered),
        "warnings": list(table.warnings),
        "query_s": table.query_s,
        "replicas": [replica_json(row) for row in table.rows],
        "models": [model_json(row) for row in table.models],
    }
