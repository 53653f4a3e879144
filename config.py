"""Settings: a TOML file loaded into frozen dataclasses, checked key by key, overridden by flags."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import string
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from slotop.errors import ConfigError
from slotop.redact import REDACTED, argv_secrets, redact_argv, shown_url, url_password
from slotop.slo import Slo

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

SAMPLE_PATH = Path(__file__).with_name("sample.toml")
LOCAL_FILE_NAME = "slotop.toml"
CONFIG_ENV = "SLOTOP_CONFIG"


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """Where the replica is and how to read it."""

    url: str = "http://127.0.0.1:8000"
    api_key_env: str = "VLLM_API_KEY"
    scrape_interval_s: float = 1.0
    timeout_s: float = 5.0
    max_scrape_mb: float = 32.0
    api_key: str | None = field(default=None, repr=False, compare=False)


DEFAULT_SLO = Slo(ttft_s=0.5, itl_s=0.05, ttft_percentile=99.0, itl_percentile=99.0)
"""The SLO without a settings file: TTFT p99 under 500 ms, inter-token latency p99 under 50 ms."""

SLO_KEYS_MS: dict[str, str] = {"ttft_ms": "ttft_s", "itl_ms": "itl_s"}
"""The `[slo]` keys held in milliseconds, each with the `Slo` field (in seconds) it becomes."""

SLO_KEYS: tuple[str, ...] = ("ttft_ms", "ttft_percentile", "itl_ms", "itl_percentile")
"""The `[slo]` keys, in the order the sample file and recorded settings list them."""


def slo_from_keys(values: Mapping[str, float], base: Slo = DEFAULT_SLO) -> Slo:
    """``base`` with `[slo]` keys' values put in: the one place their milliseconds become seconds."""
    fields = {
        SLO_KEYS_MS.get(key, key): value / 1e3 if key in SLO_KEYS_MS else value
        for key, value in values.items()
    }
    return dataclasses.replace(base, **fields)


def slo_keys(slo: Slo) -> dict[str, float]:
    """The SLO under its `[slo]` keys, targets in milliseconds, as recorded settings hold it.

    A target reads back as the milliseconds it was given: the product with 1000 is rounded to 15
    significant digits, which undoes the division's rounding for any value written in 15 or fewer.
    """
    return {
        "ttft_ms": float(f"{slo.ttft_s * 1e3:.15g}"),
        "ttft_percentile": slo.ttft_percentile,
        "itl_ms": float(f"{slo.itl_s * 1e3:.15g}"),
        "itl_percentile": slo.itl_percentile,
    }


@dataclass(frozen=True, slots=True)
class WindowSettings:
    """The sliding windows that rates and quantiles are computed over."""

    long_s: float = 60.0
    short_s: float = 10.0


@dataclass(frozen=True, slots=True)
class GpuSettings:
    """Which GPUs to show: NVML indices, or every visible one when empty."""

    indices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """The load probe: what each request looks like, the caps on the dial, and where it may go."""

    endpoint: Literal["completions", "chat"] = "completions"
    prompt_form: Literal["auto", "token_ids", "text"] = "auto"
    max_concurrency: int = 64
    max_rate_rps: float = 50.0
    initial_concurrency: int = 1
    burstiness: float = 1.0
    prompt_distribution: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    prompt_tokens: int = 512
    prompt_spread_tokens: int = 0
    output_distribution: Literal["fixed", "uniform", "normal", "lognormal"] = "fixed"
    output_tokens: int = 128
    output_spread_tokens: int = 0
    shared_prefix_tokens: int = 0
    shared_prefix_ratio: float = 1.0
    prompts_file: str = ""
    ignore_eos: bool = True
    request_timeout_s: float = 300.0
    allow_remote_load: bool = False
    workers: int | Literal["auto"] = "auto"
    output_dither_ratio: float = 0.125


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """The replica slotop starts and restarts: its command, and the dials it was given."""

    command: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    working_dir: str = ""
    log_file: str = ""
    health_timeout_s: float = 600.0
    stop_grace_s: float = 30.0
    drain_timeout_s: float = 30.0
    kv_cache_dtype: str = "auto"
    max_num_seqs: int = 0
    max_num_batched_tokens: int = 0
    restart_command: tuple[str, ...] = ()
    quality_prompts_file: str = ""


@dataclass(frozen=True, slots=True)
class TuiSettings:
    """The screen: how often it refreshes, and the load `slotop demo` starts with."""

    refresh_s: float = 1.0
    demo_concurrency: int = 2


@dataclass(frozen=True, slots=True)
class SweepSettings:
    """The concurrency sweep: its steps, how long each is measured, and when it stops early."""

    concurrency: tuple[int, ...] = ()
    start_concurrency: int = 1
    growth_factor: float = 2.0
    max_concurrency: int = 0
    warmup_s: float = 5.0
    dwell_s: float = 20.0
    min_requests: int = 10
    max_dwell_s: float = 120.0
    max_follow_s: float = 0.0
    knee_gain_ratio: float = 0.1
    queue_waiting_requests: float = 1.0
    kv_full_ratio: float = 0.9
    max_error_ratio: float = 0.05
    allow_preemptions: bool = False
    refine: bool = False
    refine_resolution_ratio: float = 0.1


TUNE_DIALS: tuple[str, ...] = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")
"""The dials `slotop tune` may change, in the names `[tune] dials` takes."""


@dataclass(frozen=True, slots=True)
class TuneSettings:
    """`slotop tune`: how long it may take, which dials it may turn, and what a KV dtype must keep."""

    budget_min: float = 60.0
    dials: tuple[str, ...] = TUNE_DIALS
    max_candidates: int = 4
    quality_min_match_ratio: float = 0.9


@dataclass(frozen=True, slots=True)
class RestartSettings:
    """The before/after of a restart: how long `slotop restart` measures each side, and how many
    requests a side needs before its table is worth reading."""

    dwell_s: float = 30.0
    min_requests: int = 50
    max_dwell_s: float = 300.0


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The session recording: whether it is on, where it goes, how much of the probe it keeps, and
    how large a file and the folder may grow."""

    record: bool = True
    folder: str = ""
    itl_gaps: bool = False
    max_file_mb: float = 64.0
    max_folder_mb: float = 1024.0


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """The fleet view: the Prometheus server, its credentials' sources, labels and outlier rules.

    Credentials are named (a file, or an environment variable), never held here.
    """

    prometheus_url: str = ""
    bearer_token_file: str = ""
    bearer_token_env: str = ""
    basic_auth_file: str = ""
    basic_auth_env: str = ""
    tls_verify: bool = True
    ca_file: str = ""
    query_timeout_s: float = 10.0
    replica_labels: tuple[str, ...] = ("job", "instance")
    model_label: str = "model_name"
    direct_from_instance: bool = False
    slow_ratio: float = 2.0
    skew_kv_ratio: float = 0.25
    skew_running_ratio: float = 2.0


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting slotop reads, with where it came from."""

    replica: ReplicaSettings = ReplicaSettings()
    slo: Slo = DEFAULT_SLO
    window: WindowSettings = WindowSettings()
    gpu: GpuSettings = GpuSettings()
    load: LoadSettings = LoadSettings()
    launch: LaunchSettings = LaunchSettings()
    tui: TuiSettings = TuiSettings()
    sweep: SweepSettings = SweepSettings()
    tune: TuneSettings = TuneSettings()
    restart: RestartSettings = RestartSettings()
    session: SessionSettings = SessionSettings()
    fleet: FleetSettings = FleetSettings()
    source: str = "built-in defaults"


Check = Callable[[Any], bool]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


def _is_percentile(value: float) -> bool:
    return 0 < value < 100


def _is_http_url(value: str) -> bool:
    parts = urlsplit(value)
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _is_env_name(value: str) -> bool:
    return value == "" or (value.replace("_", "a").isalnum() and not value[0].isdigit())


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


MAX_PROBE_WORKERS = 64
"""The most `[load] workers` may name (slotop.collectors.probe.loadshape.MAX_WORKERS)."""


def _is_workers(value: Any) -> bool:
    return value == "auto" or (_is_whole(value) and 1 <= value <= MAX_PROBE_WORKERS)


def _one_of(*choices: str) -> Check:
    return lambda value: value in choices


def _is_index_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    )


def _is_argv(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(isinstance(a, str) and a for a in value)


def _is_env_table(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and k and _is_env_name(k) and isinstance(v, str)
        for k, v in value.items()
    )


RESTART_PLACEHOLDERS = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "dial_args")
"""The names a [launch] restart_command may hold in braces; {dial_args} must be a whole argument."""


def _placeholders(argument: str) -> list[str]:
    try:
        return [name for _, name, _, _ in string.Formatter().parse(argument) if name is not None]
    except ValueError:
        return ["an unbalanced brace"]


LAUNCH_DIAL_FLAGS = ("--kv-cache-dtype", "--max-num-seqs", "--max-num-batched-tokens")
"""The `vllm serve` flags slotop owns in a launch command: [launch] holds their values."""


@dataclass(frozen=True, slots=True)
class _Rule:
    """What a key must hold: its type and its value, each with the words an error uses."""

    type_ok: Check
    type_words: str
    value_ok: Check | None = None
    value_words: str = ""
    keeps_int: bool = False


_NUMBER_POSITIVE = _Rule(_is_number, "a number", _is_positive, "greater than 0")
_PERCENTILE = _Rule(_is_number, "a number", _is_percentile, "between 0 and 100, exclusive")
_WHOLE_POSITIVE = _Rule(_is_whole, "a whole number", lambda v: v >= 1, "at least 1", keeps_int=True)
_WHOLE_NOT_NEGATIVE = _Rule(
    _is_whole, "a whole number", lambda v: v >= 0, "0 or more", keeps_int=True
)
_BOOLEAN = _Rule(lambda v: isinstance(v, bool), "true or false")
_NUMBER_NOT_NEGATIVE = _Rule(
    _is_number, "a number", lambda v: math.isfinite(v) and v >= 0, "0 or more"
)
_RATIO = _Rule(_is_number, "a number", lambda v: 0 <= v <= 1, "between 0 and 1")
_DISTRIBUTION = _Rule(
    lambda v: isinstance(v, str),
    "a string",
    _one_of("fixed", "uniform", "normal", "lognormal"),
    "one of fixed, uniform, normal, lognormal",
)

_ENV_NAME = _Rule(
    lambda v: isinstance(v, str),
    "a string",
    _is_env_name,
    "an environment variable name (letters, digits, _), or empty for none",
)
_FOLDED_LABELS = frozenset({"le", "engine", "pid", "__name__"})


def _is_http_url_without_credentials(value: str) -> bool:
    parts = urlsplit(value)
    return _is_http_url(value) and parts.username is None and parts.password is None


def _is_replica_label(value: str) -> bool:
    return (
        bool(value)
        and value.replace("_", "a").isalnum()
        and value.isascii()
        and not value[0].isdigit()
        and value not in _FOLDED_LABELS
    )


_RULES: dict[str, dict[str, _Rule]] = {
    "replica": {
        "url": _Rule(
            lambda v: isinstance(v, str), "a string", _is_http_url, "an http:// or https:// URL"
        ),
        "api_key_env": _Rule(
            lambda v: isinstance(v, str),
            "a string",
            _is_env_name,
            "an environment variable name (letters, digits, _), or empty for none",
        ),
        "scrape_interval_s": _NUMBER_POSITIVE,
        "timeout_s": _NUMBER_POSITIVE,
        "max_scrape_mb": _Rule(
            _is_number,
            "a number",
            lambda v: math.isfinite(v) and 0.01 <= v <= 4096,
            "from 0.01 to 4096 (MiB read of one answer at most)",
        ),
    },
    "slo": {
        "ttft_ms": _NUMBER_POSITIVE,
        "ttft_percentile": _PERCENTILE,
        "itl_ms": _NUMBER_POSITIVE,
        "itl_percentile": _PERCENTILE,
    },
    "window": {"long_s": _NUMBER_POSITIVE, "short_s": _NUMBER_POSITIVE},
    "gpu": {"indices": _Rule(_is_index_list, "a list of GPU indices (integers ≥ 0)")},
    "load": {
        "endpoint": _Rule(
            lambda v: isinstance(v, str),
            "a string",
            _one_of("completions", "chat"),
            "completions or chat",
        ),
        "prompt_form": _Rule(
            lambda v: isinstance(v, str),
            "a string",
            _one_of("auto", "token_ids", "text"),
            "one of auto, token_ids, text",
        ),
        "max_concurrency": _WHOLE_POSITIVE,
        "max_rate_rps": _NUMBER_POSITIVE,
        "initial_concurrency": _WHOLE_NOT_NEGATIVE,
        "burstiness": _NUMBER_POSITIVE,
        "prompt_distribution": _DISTRIBUTION,
        "prompt_tokens": _WHOLE_POSITIVE,
        "prompt_spread_tokens": _WHOLE_NOT_NEGATIVE,
        "output_distribution": _DISTRIBUTION,
        "output_tokens": _WHOLE_POSITIVE,
        "output_spread_tokens": _WHOLE_NOT_NEGATIVE,
        "shared_prefix_tokens": _WHOLE_NOT_NEGATIVE,
        "shared_prefix_ratio": _RATIO,
        "prompts_file": _Rule(lambda v: isinstance(v, str), "a string (a path, or empty)"),
        "ignore_eos": _BOOLEAN,
        "request_timeout_s": _NUMBER_POSITIVE,
        "allow_remote_load": _BOOLEAN,
        "workers": _Rule(
            lambda v: isinstance(v, str) or _is_whole(v),
            '"auto" or a whole number',
            _is_workers,
            f'"auto", or a whole number from 1 to {MAX_PROBE_WORKERS}',
            keeps_int=True,
        ),
        "output_dither_ratio": _Rule(
            _is_number, "a number", lambda v: 0 <= v <= 0.5, "from 0 to 0.5 (0: exact lengths)"
        ),
    },
    "launch": {
        "command": _Rule(_is_argv, "a list of non-empty strings (the program, then its arguments)"),
        "env": _Rule(_is_env_table, 'a table of NAME = "value" strings'),
        "working_dir": _Rule(lambda v: isinstance(v, str), "a string (a path, or empty)"),
        "log_file": _Rule(lambda v: isinstance(v, str), "a string (a path, or empty)"),
        "health_timeout_s": _NUMBER_POSITIVE,
        "stop_grace_s": _NUMBER_POSITIVE,
        "drain_timeout_s": _NUMBER_POSITIVE,
        "kv_cache_dtype": _Rule(
            lambda v: isinstance(v, str), "a string", lambda v: bool(v.strip()), "not empty"
        ),
        "max_num_seqs": _WHOLE_NOT_NEGATIVE,
        "max_num_batched_tokens": _WHOLE_NOT_NEGATIVE,
        "restart_command": _Rule(_is_argv, "a list of non-empty strings, or empty for none"),
        "quality_prompts_file": _Rule(
            lambda v: isinstance(v, str),
            "a string (a path, or empty)",
            lambda v: v == "" or Path(v).is_file(),
            "an existing JSONL prompts file (a relative path is taken from the working "
            "directory): fix the path, or leave it empty for the built-in prompts",
        ),
    },
    "tui": {"refresh_s": _NUMBER_POSITIVE, "demo_concurrency": _WHOLE_POSITIVE},
    "sweep": {
        "concurrency": _Rule(
            lambda v: (
                isinstance(v, list | tuple)
                and all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in v)
            ),
            "a list of concurrencies (integers ≥ 1), or empty for 1, 2, 4, …",
        ),
        "start_concurrency": _WHOLE_POSITIVE,
        "growth_factor": _Rule(_is_number, "a number", lambda v: v > 1, "greater than 1"),
        "max_concurrency": _WHOLE_NOT_NEGATIVE,
        "warmup_s": _NUMBER_NOT_NEGATIVE,
        "dwell_s": _NUMBER_POSITIVE,
        "min_requests": _WHOLE_POSITIVE,
        "max_dwell_s": _NUMBER_POSITIVE,
        "max_follow_s": _NUMBER_NOT_NEGATIVE,
        "knee_gain_ratio": _RATIO,
        "queue_waiting_requests": _NUMBER_POSITIVE,
        "kv_full_ratio": _Rule(_is_number, "a number", lambda v: 0 < v <= 1, "above 0, at most 1"),
        "max_error_ratio": _RATIO,
        "allow_preemptions": _BOOLEAN,
        "refine": _BOOLEAN,
        "refine_resolution_ratio": _Rule(
            _is_number, "a number", lambda v: 0 <= v < 1, "at least 0, below 1"
        ),
    },
    "tune": {
        "budget_min": _NUMBER_POSITIVE,
        "dials": _Rule(
            lambda v: isinstance(v, list | tuple) and all(isinstance(n, str) for n in v),
            "a list of dial names",
            lambda v: len(set(v)) == len(v) and all(n in TUNE_DIALS for n in v),
            f"each of {', '.join(TUNE_DIALS)} at most once (empty: tune changes none)",
        ),
        "max_candidates": _WHOLE_POSITIVE,
        "quality_min_match_ratio": _RATIO,
    },
    "restart": {
        "dwell_s": _NUMBER_POSITIVE,
        "min_requests": _WHOLE_POSITIVE,
        "max_dwell_s": _NUMBER_POSITIVE,
    },
    "session": {
        "record": _BOOLEAN,
        "folder": _Rule(lambda v: isinstance(v, str), "a string (a folder, or empty)"),
        "itl_gaps": _BOOLEAN,
        "max_file_mb": _Rule(
            _is_number,
            "a number",
            lambda v: math.isfinite(v) and (v == 0 or v >= 0.01),
            "0 (one file, however large) or at least 0.01 (MiB)",
        ),
        "max_folder_mb": _Rule(
            _is_number,
            "a number",
            lambda v: math.isfinite(v) and (v == 0 or v >= 0.01),
            "0 (no budget: nothing is deleted) or at least 0.01 (MiB)",
        ),
    },
    "fleet": {
        "prometheus_url": _Rule(
            lambda v: isinstance(v, str),
            "a string",
            lambda v: v == "" or _is_http_url_without_credentials(v),
            "an http:// or https:// URL without a user or password (credentials go in a file "
            "or the environment: see the *_file and *_env keys), or empty for none",
        ),
        "bearer_token_file": _Rule(lambda v: isinstance(v, str), "a string (a path, or empty)"),
        "bearer_token_env": _ENV_NAME,
        "basic_auth_file": _Rule(lambda v: isinstance(v, str), "a string (a path, or empty)"),
        "basic_auth_env": _ENV_NAME,
        "tls_verify": _BOOLEAN,
        "ca_file": _Rule(lambda v: isinstance(v, str), "a string (a path, or empty)"),
        "query_timeout_s": _NUMBER_POSITIVE,
        "replica_labels": _Rule(
            lambda v: isinstance(v, list | tuple) and all(isinstance(n, str) for n in v),
            "a list of label names",
            lambda v: bool(v) and all(_is_replica_label(n) for n in v) and len(set(v)) == len(v),
            "at least one Prometheus label name (letters, digits, _; not le, engine, pid or "
            "__name__), each once",
        ),
        "model_label": _Rule(
            lambda v: isinstance(v, str),
            "a string",
            _is_replica_label,
            "a Prometheus label name (letters, digits, _; not le, engine, pid or __name__)",
        ),
        "direct_from_instance": _BOOLEAN,
        "slow_ratio": _Rule(_is_number, "a number", lambda v: v > 1, "greater than 1"),
        "skew_kv_ratio": _Rule(_is_number, "a number", lambda v: 0 < v <= 1, "above 0, at most 1"),
        "skew_running_ratio": _Rule(_is_number, "a number", lambda v: v > 1, "greater than 1"),
    },
}

_SECTION_TYPES: dict[str, type[Any]] = {
    "replica": ReplicaSettings,
    "slo": Slo,
    "window": WindowSettings,
    "gpu": GpuSettings,
    "load": LoadSettings,
    "launch": LaunchSettings,
    "tui": TuiSettings,
    "sweep": SweepSettings,
    "tune": TuneSettings,
    "restart": RestartSettings,
    "session": SessionSettings,
    "fleet": FleetSettings,
}


def _suggest(name: str, choices: list[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}known: {', '.join(choices)}"


def _shown_value(value: Any) -> str:
    """A refused value as an error message shows it: URLs without user info, command lines with
    their secrets hidden, the values of an environment table left out."""
    if isinstance(value, str):
        return repr(shown_url(value)) if "://" in value or "@" in value else repr(value)
    if isinstance(value, list | tuple) and all(isinstance(item, str) for item in value):
        return repr(redact_argv(value))
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{name!r} = {REDACTED}" for name in value) + "}"
    return repr(value)


def secret_values(settings: Settings, environ: Mapping[str, str] | None = None) -> list[str]:
    """Every secret the settings hold or name: the API key, a URL's password, [launch] env values
    and secret-looking arguments of its commands, the fleet's credentials (file or variable).

    What slotop shows, logs or records is scrubbed of these (slotop.redact.Scrubber)."""
    env = os.environ if environ is None else environ
    found: list[str | None] = [settings.replica.api_key, url_password(settings.replica.url)]
    found += [value for _, value in settings.launch.env]
    found += argv_secrets(settings.launch.command) + argv_secrets(settings.launch.restart_command)
    fleet = settings.fleet
    for name in (fleet.bearer_token_env, fleet.basic_auth_env):
        if name:
            value = env.get(name, "").strip()
            found += [value, value.partition(":")[2]]
    for file in (fleet.bearer_token_file, fleet.basic_auth_file):
        if file:
            try:
                text = Path(file).expanduser().read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError):
                continue
            line = text.splitlines()[0].strip() if text else ""
            found += [line, line.partition(":")[2]]
    return [secret for secret in found if secret]


def _checked(source: str, section: str, key: str, value: Any) -> Any:
    rules = _RULES[section]
    if key not in rules:
        raise ConfigError(
            f"{source}: unknown key [{section}] {key}; {_suggest(key, sorted(rules))}"
        )
    rule = rules[key]
    if not rule.type_ok(value):
        raise ConfigError(
            f"{source}: [{section}] {key} = {_shown_value(value)} is {type(value).__name__}; "
            f"expected {rule.type_words}"
        )
    if rule.value_ok is not None and not rule.value_ok(value):
        raise ConfigError(
            f"{source}: [{section}] {key} = {_shown_value(value)}; expected {rule.value_words}"
        )
    if isinstance(value, list):
        return tuple(value)
    if isinstance(value, Mapping):
        return tuple(sorted(value.items()))
    if _is_number(value) and not rule.keeps_int:
        return float(value)
    return value


def _check_whole(settings: Settings) -> Settings:
    """Check what spans keys, and resolve the API key from its environment variable."""
    window = settings.window
    if window.short_s > window.long_s:
        raise ConfigError(
            f"{settings.source}: [window] short_s = {window.short_s:g} is longer than "
            f"long_s = {window.long_s:g}; the short window must fit in the long one"
        )
    load = settings.load
    if load.initial_concurrency > load.max_concurrency:
        raise ConfigError(
            f"{settings.source}: [load] initial_concurrency = {load.initial_concurrency} is above "
            f"max_concurrency = {load.max_concurrency}; raise the cap or start lower"
        )
    if isinstance(load.workers, int) and load.workers > load.max_concurrency:
        raise ConfigError(
            f"{settings.source}: [load] workers = {load.workers} is above max_concurrency = "
            f"{load.max_concurrency}; each worker holds at least one stream: ask for fewer "
            'workers, raise the cap, or say "auto"'
        )
    if load.shared_prefix_tokens and load.prompts_file:
        raise ConfigError(
            f"{settings.source}: [load] shared_prefix_tokens = {load.shared_prefix_tokens} goes "
            "on synthetic prompts only, but prompts_file is set; set shared_prefix_tokens = 0 "
            'or prompts_file = ""'
        )
    sweep = settings.sweep
    if sweep.max_dwell_s < sweep.dwell_s:
        raise ConfigError(
            f"{settings.source}: [sweep] max_dwell_s = {sweep.max_dwell_s:g} is shorter than "
            f"dwell_s = {sweep.dwell_s:g}; a step dwells at least dwell_s"
        )
    above = [c for c in (*sweep.concurrency, sweep.max_concurrency) if c > load.max_concurrency]
    if above:
        raise ConfigError(
            f"{settings.source}: [sweep] asks for concurrency {max(above)}, above [load] "
            f"max_concurrency = {load.max_concurrency}; raise the cap or sweep lower"
        )
    for argument in settings.launch.command:
        flag = argument.partition("=")[0]
        if flag in LAUNCH_DIAL_FLAGS:
            key = flag.removeprefix("--").replace("-", "_")
            raise ConfigError(
                f"{settings.source}: [launch] command holds {flag}; slotop sets that flag itself: "
                f"put the value in [launch] {key} instead"
            )
    for argument in settings.launch.restart_command:
        for name in _placeholders(argument):
            if name not in RESTART_PLACEHOLDERS or (
                name == "dial_args" and argument != "{dial_args}"
            ):
                what = f"{{{name}}}" if name.isidentifier() else name
                raise ConfigError(
                    f"{settings.source}: [launch] restart_command argument "
                    f"{redact_argv([argument])[0]!r} holds "
                    f"{what}; use {{kv_cache_dtype}}, {{max_num_seqs}} or "
                    "{max_num_batched_tokens} inside an argument, or {dial_args} as a whole one "
                    "(write {{ and }} for literal braces)"
                )
    session = settings.session
    if session.max_folder_mb and session.max_file_mb > session.max_folder_mb:
        raise ConfigError(
            f"{settings.source}: [session] max_file_mb = {session.max_file_mb:g} is above "
            f"max_folder_mb = {session.max_folder_mb:g}; one file of a session would outgrow the "
            "folder's budget: lower max_file_mb or raise max_folder_mb"
        )
    _check_fleet(settings)
    env_name = settings.replica.api_key_env
    api_key = (os.environ.get(env_name) or None) if env_name else None
    replica = dataclasses.replace(settings.replica, api_key=api_key)
    return dataclasses.replace(settings, replica=replica)


def _check_fleet(settings: Settings) -> None:
    """One source per credential, one kind of credential, and the model label apart."""
    fleet = settings.fleet
    for kind in ("bearer_token", "basic_auth"):
        file, env = getattr(fleet, f"{kind}_file"), getattr(fleet, f"{kind}_env")
        if file and env:
            raise ConfigError(
                f"{settings.source}: [fleet] sets both {kind}_file and {kind}_env; keep one"
            )
    if (fleet.bearer_token_file or fleet.bearer_token_env) and (
        fleet.basic_auth_file or fleet.basic_auth_env
    ):
        raise ConfigError(
            f"{settings.source}: [fleet] names both a bearer token and basic auth; a server "
            "takes one: keep the one it expects"
        )
    if fleet.model_label in fleet.replica_labels:
        raise ConfigError(
            f"{settings.source}: [fleet] model_label = {fleet.model_label!r} is also in "
            "replica_labels; list only the labels that tell replicas of one model apart"
        )


_DEFAULTS = Settings()


def _with_keys(section: str, current: Any, values: Mapping[str, Any]) -> Any:
    """A section with checked values, named by the settings file's keys, put in place of its own."""
    if section == "slo":
        return slo_from_keys(values, current)
    return dataclasses.replace(current, **values)


def settings_from_mapping(data: Mapping[str, Any], source: str) -> Settings:
    """Build settings from parsed TOML, naming ``source`` and the key in every error."""
    sections: dict[str, Any] = {}
    for section, table in data.items():
        if section not in _SECTION_TYPES:
            raise ConfigError(
                f"{source}: unknown section [{section}]; {_suggest(section, sorted(_SECTION_TYPES))}"
            )
        if not isinstance(table, Mapping):
            raise ConfigError(f"{source}: {section} must be a [{section}] table, not a value")
        values = {key: _checked(source, section, key, value) for key, value in table.items()}
        sections[section] = _with_keys(section, getattr(_DEFAULTS, section), values)
    return _check_whole(Settings(**sections, source=source))


def find_config_file(explicit: Path | None) -> Path | None:
    """The settings file to read: --config, then $SLOTOP_CONFIG, ./slotop.toml, the user's."""
    if explicit is not None:
        return explicit
    from_env = os.environ.get(CONFIG_ENV)
    if from_env:
        return Path(from_env)
    local = Path.cwd() / LOCAL_FILE_NAME
    if local.is_file():
        return local
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    user = config_home / "slotop" / LOCAL_FILE_NAME
    return user if user.is_file() else None


def load_settings(explicit: Path | None = None) -> Settings:
    """Load settings from the file ``find_config_file`` picks, or the defaults when there is none."""
    path = find_config_file(explicit)
    if path is None:
        return _check_whole(Settings())
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such settings file; `slotop sample-config > {path}` writes one"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the settings file ({exc.strerror})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    return settings_from_mapping(data, str(path))


def with_overrides(settings: Settings, overrides: Mapping[str, Any]) -> Settings:
    """Apply flag values given as ``{"section.key": value}``; ``None`` means the flag was not set."""
    changed: dict[str, dict[str, Any]] = {}
    for dotted, value in overrides.items():
        if value is None:
            continue
        section, _, key = dotted.partition(".")
        changed.setdefault(section, {})[key] = _checked("command line", section, key, value)
    if not changed:
        return settings
    replaced = {
        section: _with_keys(section, getattr(settings, section), values)
        for section, values in changed.items()
    }
    return _check_whole(dataclasses.replace(settings, **replaced))
