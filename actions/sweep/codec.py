"""A sweep on disk: the JSON record (which a resume reads) and the CSV of its steps.

The JSON is the sweep's record: settings, every measured step with its flags, why it stopped and
the operating point. It is written after every step, so an interrupted sweep resumes from it.
A step is written flat (`STEP_LAYOUT` names each key and where in `StepResult` it comes from),
in the order older slotops wrote it, so their files read back and are written again unchanged.
Each step also says how far its token rate sits from the replica's counter rate
(`throughput_gap_ratio`), whether it met the SLO, whether the probe's lag bent it and its flags:
all derived, so not read back. The limits keep the replica's engine (left out for vLLM), and a
sweep of an engine that cannot measure some keys (SGLang: the steps' batch size) lists them
under `unmeasured`, with why, so a null there is not read as a gap in the scrapes. Reading
checks every field's type against the model and names the file, the field
(`steps[2].ttft_slo_s`, counting from 0) and what was expected.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from slotop import fmt
from slotop.actions.errors import SweepError
from slotop.actions.sweep.decide import (
    ReplicaLimits,
    StopReason,
    StopRules,
    all_step_flags,
    recommend,
    slo_verdict,
)
from slotop.actions.sweep.model import ClientSummary, ServerSummary, StepResult
from slotop.actions.sweep.plan import SweepSpec
from slotop.actions.sweep.runner import SweepResult
from slotop.collectors.engines import ENGINES
from slotop.slo import Slo

JSON_FORMAT = "slotop-sweep"
JSON_VERSION = 1

STEP_LAYOUT: tuple[tuple[str, str], ...] = (
    ("concurrency", "concurrency"),
    ("started_at_s", "started_at_s"),
    ("measured_s", "measured_s"),
    ("requests_ok", "client.requests_ok"),
    ("requests_failed", "client.requests_failed"),
    ("min_requests_met", "min_requests_met"),
    ("ttft_p50_s", "client.ttft_p50_s"),
    ("ttft_p90_s", "client.ttft_p90_s"),
    ("ttft_p99_s", "client.ttft_p99_s"),
    ("ttft_slo_s", "client.ttft_slo_s"),
    ("itl_p50_s", "client.itl_p50_s"),
    ("itl_p90_s", "client.itl_p90_s"),
    ("itl_p99_s", "client.itl_p99_s"),
    ("itl_slo_s", "client.itl_slo_s"),
    ("tpot_p50_s", "client.tpot_p50_s"),
    ("tpot_p90_s", "client.tpot_p90_s"),
    ("tpot_p99_s", "client.tpot_p99_s"),
    ("goodput_ratio", "client.goodput_ratio"),
    ("output_tokens_per_s", "client.output_tokens_per_s"),
    ("requests_per_s", "client.requests_per_s"),
    ("server_ttft_p50_s", "server.ttft_p50_s"),
    ("server_ttft_p90_s", "server.ttft_p90_s"),
    ("server_ttft_p99_s", "server.ttft_p99_s"),
    ("server_ttft_slo_s", "server.ttft_slo_s"),
    ("server_itl_p50_s", "server.itl_p50_s"),
    ("server_itl_p90_s", "server.itl_p90_s"),
    ("server_itl_p99_s", "server.itl_p99_s"),
    ("server_itl_slo_s", "server.itl_slo_s"),
    ("server_ttft_slo_verdict", "server.ttft_slo_verdict"),
    ("server_itl_slo_verdict", "server.itl_slo_verdict"),
    ("server_output_tokens_per_s", "server.output_tokens_per_s"),
    ("kv_usage_mean_ratio", "server.kv_usage_mean_ratio"),
    ("kv_usage_max_ratio", "server.kv_usage_max_ratio"),
    ("preemptions", "server.preemptions"),
    ("waiting_mean", "server.waiting_mean"),
    ("waiting_max", "server.waiting_max"),
    ("running_mean", "server.running_mean"),
    ("running_max", "server.running_max"),
    ("batch_tokens_p99", "server.batch_tokens_p99"),
    ("followed_s", "followed_s"),
    ("requests_cut", "requests_cut"),
    ("batch_tokens_p99_lower", "server.batch_tokens_p99_lower"),
    ("batch_tokens_p99_upper", "server.batch_tokens_p99_upper"),
    ("sim_gpu_util_mean_ratio", "server.sim_gpu_util_mean_ratio"),
    ("sim_gpu_util_max_ratio", "server.sim_gpu_util_max_ratio"),
    ("client_ttft_error_s", "client.ttft_error_s"),
    ("client_itl_error_s", "client.itl_error_s"),
    ("client_lag_p99_s", "client.lag_p99_s"),
    ("running_peak_share", "server.running_peak_share"),
    ("ttft_slo_low_s", "client.ttft_slo_low_s"),
    ("ttft_slo_high_s", "client.ttft_slo_high_s"),
    ("itl_slo_low_s", "client.itl_slo_low_s"),
    ("itl_slo_high_s", "client.itl_slo_high_s"),
    ("waiting_band", "server.waiting_band"),
)
"""Each measured key of a step on disk, in file order, with its place in `StepResult`."""

STEP_FIELDS: tuple[str, ...] = tuple(key for key, _ in STEP_LAYOUT)
"""The measured keys of a step on disk, in file order (the CSV's columns too)."""

_SECTIONS: dict[str, type[Any]] = {"client": ClientSummary, "server": ServerSummary}


def _check_layout() -> None:
    """Every field of the model is on disk exactly once (checked at import)."""
    places = [place for _, place in STEP_LAYOUT]
    model = [f.name for f in dataclasses.fields(StepResult) if f.name not in _SECTIONS]
    model += [
        f"{section}.{f.name}"
        for section, kind in _SECTIONS.items()
        for f in dataclasses.fields(kind)
    ]
    if sorted(places) != sorted(model) or len(set(STEP_FIELDS)) != len(STEP_FIELDS):
        raise AssertionError("STEP_LAYOUT does not place every field of StepResult once")


_check_layout()


def _step_value(step: StepResult, place: str) -> Any:
    section, _, name = place.rpartition(".")
    return getattr(getattr(step, section) if section else step, name)


def step_values(step: StepResult) -> dict[str, Any]:
    """A step's measured values under their keys on disk, in file order."""
    return {key: _step_value(step, place) for key, place in STEP_LAYOUT}


def sweep_to_json(result: SweepResult) -> dict[str, Any]:
    """The whole sweep as a JSON-ready mapping."""
    settings = result.settings
    flags = all_step_flags(result.steps, settings.slo, settings.rules)
    steps = []
    for step, step_flags in zip(result.steps, flags, strict=True):
        row = {key: fmt.finite(value) for key, value in step_values(step).items()}
        row["throughput_gap_ratio"] = fmt.finite(step.throughput_gap_ratio)
        row["slo_met"] = slo_verdict(step, settings.slo).met
        row["client_bound"] = step.client.bent_by_lag
        row["flags"] = [flag.value for flag in step_flags]
        steps.append(row)
    recommendation = result.recommendation
    headroom = recommendation.headroom
    return {
        "format": JSON_FORMAT,
        "version": JSON_VERSION,
        "url": result.url,
        "started_at_s": result.started_at_s,
        "settings": {
            "plan": list(settings.plan),
            "warmup_s": settings.warmup_s,
            "dwell_s": settings.dwell_s,
            "min_requests": settings.min_requests,
            "max_dwell_s": settings.max_dwell_s,
            "tick_s": settings.tick_s,
            "max_follow_s": settings.max_follow_s,
            "refine": settings.refine,
            "refine_resolution_ratio": settings.refine_resolution_ratio,
            "slo": dataclasses.asdict(settings.slo),
            "rules": dataclasses.asdict(settings.rules),
            "limits": _limits_json(settings.limits),
        },
        "steps": steps,
        **({"unmeasured": missing} if (missing := unmeasured(result)) else {}),
        "stop": result.stop.value if result.stop is not None else None,
        "finished": result.finished,
        "met_slo": result.met_slo,
        "recommendation": {
            "concurrency": recommendation.concurrency,
            "next_concurrency": recommendation.next_concurrency,
            "binding": recommendation.binding.value if recommendation.binding else None,
            "binding_detail": recommendation.binding_detail,
            "certainty": recommendation.certainty,
            "headroom": (
                {k: fmt.finite(v) for k, v in dataclasses.asdict(headroom).items()}
                if headroom is not None
                else None
            ),
        },
    }


def _limits_json(limits: ReplicaLimits) -> dict[str, Any]:
    """The known limits; their engine only when it is not vLLM, so a vLLM sweep's file reads as
    it did before engines were kept."""
    data = dataclasses.asdict(limits)
    if limits.engine == "vllm":
        del data["engine"]
    return data


def unmeasured(result: SweepResult) -> dict[str, str]:
    """The step keys the replica's engine cannot measure, each with why (SGLang has no
    tokens-per-step histogram, so `batch_tokens_p99` and its bounds stay null)."""
    terms = result.settings.limits.terms
    if terms.batch_tokens_served:
        return {}
    return {key: terms.batch_tokens_missing for key in BATCH_TOKEN_KEYS}


BATCH_TOKEN_KEYS = ("batch_tokens_p99", "batch_tokens_p99_lower", "batch_tokens_p99_upper")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_CHECKS: dict[str, tuple[Callable[[object], bool], str]] = {
    "int": (_is_whole, "a whole number"),
    "float": (_is_number, "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "Engine": (lambda v: v in ENGINES, " or ".join(map(repr, ENGINES))),
}
"""What each type the model declares accepts on disk, and its name in an error."""


def _expect(annotation: str) -> tuple[Callable[[object], bool], str]:
    """The check of a declared type (`float | None`: a number or null)."""
    base, optional = annotation.removesuffix(" | None"), annotation.endswith(" | None")
    accepts, words = _CHECKS[base]
    if not optional:
        return accepts, words
    return (lambda v: v is None or accepts(v)), f"{words} or null"


_Field = tuple[str, Callable[[object], bool], str, bool]
"""A field's name, its check, what it expects in words, and whether it may be left out."""


def _schema(kind: type[Any], skip: frozenset[str] = frozenset()) -> tuple[_Field, ...]:
    """The checks of a dataclass's fields, from their declared types (an unknown type fails here,
    at import, not while reading a file)."""
    missing = dataclasses.MISSING
    return tuple(
        (
            f.name,
            *_expect(str(f.type)),
            f.default is not missing or f.default_factory is not missing,
        )
        for f in dataclasses.fields(kind)
        if f.name not in skip
    )


_SCHEMAS: dict[type[Any], tuple[_Field, ...]] = {
    kind: _schema(kind) for kind in (Slo, StopRules, ReplicaLimits, ClientSummary, ServerSummary)
}
_STEP_SCHEMA = _schema(StepResult, skip=frozenset(_SECTIONS))
_SPEC_SCHEMA = _schema(SweepSpec, skip=frozenset({"plan", "slo", "rules", "limits"}))


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Reader:
    """Reads typed values out of a sweep file's JSON, naming the file and field in every error."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(
        self, path: str, expected: str, value: object = None, *, missing: bool = False
    ) -> SweepError:
        found = "it is missing" if missing else f"found {_shown(value)}"
        return SweepError(f"{self.where}: {path}: expected {expected}; {found}")

    def section(self, data: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
        value = data.get(key)
        if not isinstance(value, Mapping):
            raise self.fail(path, "an object", value, missing=key not in data)
        return value

    def fields(
        self,
        schema: tuple[_Field, ...],
        data: Mapping[str, Any],
        path: str,
        keys: Mapping[str, str],
    ) -> dict[str, Any]:
        """The values of a schema's fields found in `data` (each under `keys[name]`, else its
        own name); a field that may be left out and is missing takes its default."""
        values = {}
        for name, accepts, expected, optional in schema:
            key = keys.get(name, name)
            where = f"{path}.{key}" if path else key
            if key not in data:
                if optional:
                    continue
                raise self.fail(where, expected, missing=True)
            value = data[key]
            if not accepts(value):
                raise self.fail(where, expected, value)
            values[name] = value
        return values

    def build(self, kind: type[Any], values: Mapping[str, Any], path: str) -> Any:
        try:
            return kind(**values)
        except SweepError as exc:
            raise SweepError(f"{self.where}: {path}: {exc}") from None

    def record(self, kind: type[Any], data: Mapping[str, Any], key: str, path: str) -> Any:
        """A settings record (the SLO, the stop rules, the limits), refusing keys it lacks."""
        found = self.section(data, key, f"{path}.{key}")
        names = [name for name, *_ in _SCHEMAS[kind]]
        unknown = sorted(set(found) - set(names))
        if unknown:
            raise SweepError(
                f"{self.where}: {path}.{key}.{unknown[0]}: not a field of {kind.__name__} "
                f"(expected {', '.join(names)})"
            )
        return self.build(kind, self.fields(_SCHEMAS[kind], found, f"{path}.{key}", {}), path)


_KEYS: dict[str, dict[str, str]] = {
    section: {
        place.partition(".")[2]: key
        for key, place in STEP_LAYOUT
        if place.startswith(f"{section}.")
    }
    for section in _SECTIONS
}
"""For each side of a step, its fields' keys on disk (`client.lag_p99_s` is `client_lag_p99_s`)."""


def _read_step(reader: _Reader, row: object, path: str) -> StepResult:
    if not isinstance(row, Mapping):
        raise reader.fail(path, "an object", row)
    sides = {
        section: reader.build(kind, reader.fields(_SCHEMAS[kind], row, path, _KEYS[section]), path)
        for section, kind in _SECTIONS.items()
    }
    return StepResult(**reader.fields(_STEP_SCHEMA, row, path, {}), **sides)


def _read_settings(reader: _Reader, data: Mapping[str, Any]) -> SweepSpec:
    raw = reader.section(data, "settings", "settings")
    plan = raw.get("plan")
    if not isinstance(plan, list):
        raise reader.fail(
            "settings.plan", "a list of whole numbers", plan, missing="plan" not in raw
        )
    for index, concurrency in enumerate(plan):
        if not _is_whole(concurrency):
            raise reader.fail(f"settings.plan[{index}]", "a whole number", concurrency)
    spec: SweepSpec = reader.build(
        SweepSpec,
        {
            "plan": tuple(plan),
            "slo": reader.record(Slo, raw, "slo", "settings"),
            "rules": reader.record(StopRules, raw, "rules", "settings"),
            "limits": reader.record(ReplicaLimits, raw, "limits", "settings"),
            **reader.fields(_SPEC_SCHEMA, raw, "settings", {}),
        },
        "settings",
    )
    return spec


def sweep_from_json(data: Any, where: str = "the sweep JSON") -> SweepResult:
    """Read a sweep back from `sweep_to_json`'s mapping (to resume it or to redraw its outputs)."""
    reader = _Reader(where)
    if not isinstance(data, Mapping) or data.get("format") != JSON_FORMAT:
        raise SweepError(f'{where}: not a slotop sweep file (no "format": {JSON_FORMAT!r})')
    if data.get("version") != JSON_VERSION:
        raise SweepError(
            f"{where}: sweep file version {data.get('version')!r}; this slotop reads "
            f"version {JSON_VERSION}"
        )
    settings = _read_settings(reader, data)
    rows = data.get("steps")
    if not isinstance(rows, list):
        raise reader.fail("steps", "a list of steps", rows, missing="steps" not in data)
    steps = [_read_step(reader, row, f"steps[{index}]") for index, row in enumerate(rows)]
    stop_value = data.get("stop")
    if stop_value is not None and not isinstance(stop_value, str):
        raise reader.fail("stop", "a stop reason or null", stop_value)
    try:
        stop = StopReason(stop_value) if stop_value is not None else None
    except ValueError:
        raise SweepError(f"{where}: stop: unknown stop reason {stop_value!r}") from None
    url = data.get("url")
    if not isinstance(url, str):
        raise reader.fail("url", "a string", url, missing="url" not in data)
    started = data.get("started_at_s", 0.0)
    if not _is_number(started):
        raise reader.fail("started_at_s", "a number", started)
    return SweepResult(
        url=url,
        started_at_s=float(started),
        settings=settings,
        steps=tuple(steps),
        stop=stop,
        recommendation=recommend(steps, settings.slo, settings.rules, settings.limits),
    )


def sweep_json_text(result: SweepResult) -> str:
    """The sweep file's text, as `write_json` writes it."""
    return json.dumps(sweep_to_json(result), indent=2, allow_nan=False) + "\n"


def write_json(result: SweepResult, path: Path) -> None:
    """Write the sweep's JSON atomically (a reader never sees half a file)."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(sweep_json_text(result), encoding="utf-8")
    partial.replace(path)


def read_json(path: Path) -> SweepResult:
    """Read a sweep file, naming it in every error."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(f"{path}: no such sweep file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SweepError(f"{path}: cannot read the sweep file ({exc})") from None
    except json.JSONDecodeError as exc:
        raise SweepError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    return sweep_from_json(data, str(path))


def sweep_to_csv(result: SweepResult) -> str:
    """One CSV row per step: every measured field, whether it met the SLO, and its flags."""
    settings = result.settings
    flags = all_step_flags(result.steps, settings.slo, settings.rules)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*STEP_FIELDS, "throughput_gap_ratio", "slo_met", "flags"])
    for step, step_flags in zip(result.steps, flags, strict=True):
        values = ["" if v is None else v for v in step_values(step).values()]
        gap = "" if (g := step.throughput_gap_ratio) is None else g
        met = slo_verdict(step, settings.slo).met
        writer.writerow([*values, gap, met, " ".join(f.value for f in step_flags)])
    return out.getvalue()
