"""Where a KV budget's inputs come from: a config.json file, the simulator's tables, a live replica.

Thin IO around the pure functions of kv.py, config_json.py and readings.py. The simulator's tables are read by running
`slotop sim --dry-run --json` in a child process, so this layer never imports the simulator.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from slotop.actions.budget.config_json import budget_from_config, kv_shape_from_config
from slotop.actions.budget.kv import (
    DEFAULT_BLOCK_SIZE_TOKENS,
    DEFAULT_OVERHEAD_GIB,
    GIB,
    BudgetError,
    KvBudget,
)
from slotop.actions.budget.readings import (
    CacheInfo,
    budget_from_cache_info,
    budget_from_sim_report,
    cache_info_from_labels,
)
from slotop.actions.budget.sglang import (
    SERVER_INFO_KEYS,
    SglangPool,
    pool_from_server_info,
    sglang_budget,
)
from slotop.collectors.errors import CollectorError
from slotop.collectors.parse import parse_metrics
from slotop.collectors.replica import ReplicaClient

CACHE_INFO_FAMILY = "vllm:cache_config_info"
SIM_TIMEOUT_S = 60.0

Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def read_config_json(path: Path) -> dict[str, object]:
    """Load a model's config.json (or the folder holding it); BudgetError naming the file."""
    file = path / "config.json" if path.is_dir() else path
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise BudgetError(f"cannot read {file}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise BudgetError(f"{file} is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise BudgetError(f"{file} holds a JSON {type(data).__name__}, not a config object")
    return data


def sim_dry_run_argv(
    model: str,
    gpu: str | None = None,
    *,
    tensor_parallel_size: int | None = None,
    gpu_memory_utilization: float | None = None,
    max_model_len: int | None = None,
    block_size: int | None = None,
    python: str = sys.executable,
) -> list[str]:
    """The argument list that asks the simulator for its sizing as JSON."""
    argv = [python, "-m", "slotop", "sim", "--dry-run", "--json", "--model", model]
    options: Sequence[tuple[str, object | None]] = (
        ("--gpu", gpu),
        ("--tensor-parallel-size", tensor_parallel_size),
        ("--gpu-memory-utilization", gpu_memory_utilization),
        ("--max-model-len", max_model_len),
        ("--block-size", block_size),
    )
    for flag, value in options:
        if value is not None:
            argv += [flag, str(value)]
    return argv


def simulator_sizing(argv: Sequence[str], runner: Runner = subprocess.run) -> dict[str, object]:
    """Run the simulator's dry run and return its JSON; BudgetError with its own refusal line."""
    try:
        done = runner(
            list(argv), capture_output=True, text=True, timeout=SIM_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BudgetError(f"could not run the simulator's dry run ({exc})") from exc
    if done.returncode != 0:
        lines = [line for line in (done.stderr or "").strip().splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit status {done.returncode}"
        raise BudgetError(f"the simulator refused this sizing: {reason}")
    try:
        report = json.loads(done.stdout)
    except ValueError as exc:
        raise BudgetError(f"the simulator's dry run printed no JSON: {exc}") from exc
    if not isinstance(report, dict):
        raise BudgetError("the simulator's dry run printed JSON that is not an object")
    return report


def cache_infos_from_metrics(text: str) -> tuple[CacheInfo, ...]:
    """Every engine's `vllm:cache_config_info`, engine order; BudgetError when there is none."""
    family = parse_metrics(text).get(CACHE_INFO_FAMILY)
    if family is None:
        raise BudgetError(
            f"the replica's /metrics has no {CACHE_INFO_FAMILY}: is it vLLM, and started?"
        )
    by_engine: dict[str, Mapping[str, str]] = {}
    for sample in family.samples:
        labels = dict(sample.labels)
        by_engine[labels.get("engine", "")] = labels
    return tuple(cache_info_from_labels(by_engine[e]) for e in sorted(by_engine))


def fetch_cache_info(client: ReplicaClient) -> tuple[CacheInfo, str | None, int]:
    """Read a replica's cache info (first engine), its first model name and its engine count."""
    try:
        infos = cache_infos_from_metrics(client.metrics_text())
        models = client.served_models()
    except CollectorError as exc:
        raise BudgetError(str(exc)) from exc
    return infos[0], (models[0] if models else None), len(infos)


def fetch_sglang_pool(client: ReplicaClient) -> tuple[SglangPool, str | None]:
    """Read an SGLang server's pool from /get_server_info, its context length from /v1/models
    where the arguments leave it unset, and its first model name; BudgetError when not SGLang."""
    try:
        info = client.server_settings(SERVER_INFO_KEYS)
        models = client.served_model_lengths()
    except CollectorError as exc:
        raise BudgetError(str(exc)) from exc
    pool = pool_from_server_info(info)
    if pool.context_len_tokens is None and models:
        pool = replace(pool, context_len_tokens=models[0][1])
    return pool, (models[0][0] if models else None)


class BudgetUsageError(BudgetError):
    """The options given do not name one way to size the cache."""


@dataclass(frozen=True, slots=True)
class BudgetRequest:
    """What `slotop budget` was asked: one source (config, simulator or URL) and the sizes."""

    config_json: Path | None = None
    model: str | None = None
    gpu: str | None = None
    url: str | None = None
    api_key: str | None = None
    timeout_s: float = 5.0
    gpu_memory_gib: float | None = None
    gpu_memory_utilization: float | None = None
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    avg_len: int | None = None
    block_size: int | None = None
    weights_gib: float | None = None
    overhead_gib: float | None = None


def _refuse(request: BudgetRequest, source: str, *fields: str) -> None:
    given = [f"--{name.replace('_', '-')}" for name in fields if getattr(request, name) is not None]
    if given:
        raise BudgetUsageError(f"{', '.join(given)} do not apply when sizing from {source}")


def _from_replica(request: BudgetRequest, url: str) -> KvBudget:
    _refuse(request, "a live replica", "model", "gpu", "gpu_memory_gib", "weights_gib")
    _refuse(request, "a live replica", "overhead_gib", "gpu_memory_utilization", "block_size")
    shape = None
    if request.config_json is not None:
        shape = kv_shape_from_config(
            read_config_json(request.config_json),
            tensor_parallel_size=request.tensor_parallel_size,
            where=str(request.config_json),
        )
    with ReplicaClient(url, api_key=request.api_key, timeout_s=request.timeout_s) as client:
        try:
            info, model, engines = fetch_cache_info(client)
        except BudgetError as not_vllm:
            try:
                pool, model = fetch_sglang_pool(client)
            except BudgetError as not_sglang:
                unreachable = isinstance(not_vllm.__cause__, CollectorError) and isinstance(
                    not_sglang.__cause__, CollectorError
                )
                if unreachable:  # neither endpoint answered: one reason is enough
                    raise not_vllm from None
                raise BudgetError(f"{not_vllm}; and as SGLang: {not_sglang}") from None
            return sglang_budget(
                pool,
                shape=shape,
                context_len_tokens=request.max_model_len,
                avg_len_tokens=request.avg_len,
                model=model,
            )
    budget = budget_from_cache_info(
        info,
        shape=shape,
        max_model_len_tokens=request.max_model_len,
        avg_len_tokens=request.avg_len,
        model=model,
    )
    if engines > 1:
        note = f"the replica runs {engines} engines; this is engine 0's cache, each has its own"
        budget = replace(budget, notes=(*budget.notes, note))
    return budget


def resolve_budget(request: BudgetRequest, runner: Runner = subprocess.run) -> KvBudget:
    """Size the cache from whichever source the request names; BudgetUsageError if none or many."""
    if request.url is not None:
        return _from_replica(request, request.url)
    if request.gpu is not None or (request.model is not None and request.config_json is None):
        if request.model is not None and request.config_json is not None:
            raise BudgetUsageError("give --model NAME or --config-json PATH, not both")
        _refuse(request, "the simulator's tables", "gpu_memory_gib", "weights_gib", "overhead_gib")
        model = str(request.config_json) if request.config_json else request.model
        argv = sim_dry_run_argv(
            model or "llama-3.1-8b",
            request.gpu,
            tensor_parallel_size=request.tensor_parallel_size,
            gpu_memory_utilization=request.gpu_memory_utilization,
            max_model_len=request.max_model_len,
            block_size=request.block_size,
        )
        return budget_from_sim_report(
            simulator_sizing(argv, runner), avg_len_tokens=request.avg_len
        )
    if request.config_json is not None:
        if request.gpu_memory_gib is None:
            raise BudgetUsageError(
                "sizing from a config.json needs the GPU's memory: --gpu-memory-gib N "
                "(or --gpu NAME to take it from the simulator's tables)"
            )
        return budget_from_config(
            read_config_json(request.config_json),
            gpu_memory_bytes=int(request.gpu_memory_gib * GIB),
            gpu_memory_utilization=request.gpu_memory_utilization or 0.9,
            tensor_parallel_size=request.tensor_parallel_size,
            weights_bytes=int(request.weights_gib * GIB) if request.weights_gib else None,
            overhead_bytes=int((request.overhead_gib or DEFAULT_OVERHEAD_GIB) * GIB),
            block_size_tokens=request.block_size or DEFAULT_BLOCK_SIZE_TOKENS,
            max_model_len_tokens=request.max_model_len,
            avg_len_tokens=request.avg_len,
            where=str(request.config_json),
        )
    raise BudgetUsageError(
        "say what to size: --config-json PATH --gpu-memory-gib N, --model NAME --gpu NAME "
        "(the simulator's tables), or --url URL (a live replica)"
    )
