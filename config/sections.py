"""The settings: one frozen dataclass per section of the settings file, each key declared once.

A key's field holds its default, the rule a value must keep (slotop.config.rules) and the comment
the sample settings file shows above it; validation (slotop.config.loading) and the sample file
(slotop.config.sample) both read them from here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from slotop.config.rules import (
    ABOVE_0_AT_MOST_1,
    ARGV,
    BOOLEAN,
    ENV_NAME,
    ENV_TABLE,
    GREATER_THAN_1,
    HTTP_URL,
    NUMBER_NOT_NEGATIVE,
    NUMBER_POSITIVE,
    PATH,
    PERCENTILE,
    RATIO,
    WHOLE_NOT_NEGATIVE,
    WHOLE_POSITIVE,
    Rule,
    declared_settings,
    is_argv,
    is_http_url,
    is_string,
    is_string_list,
    is_whole,
    number_where,
    one_of,
    section,
    setting,
    string_where,
)
from slotop.slo import Slo

Endpoint = Literal["completions", "chat"]
EngineChoice = Literal["auto", "vllm", "sglang"]
PromptForm = Literal["auto", "token_ids", "text"]
Distribution = Literal["fixed", "uniform", "normal", "lognormal"]


MAX_PROBE_WORKERS = 64
"""The most `[load] workers` may name (slotop.collectors.probe.loadshape.MAX_WORKERS)."""


def _is_workers(value: Any) -> bool:
    return value == "auto" or (is_whole(value) and 1 <= value <= MAX_PROBE_WORKERS)


def _is_index_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    )


_FOLDED_LABELS = frozenset({"le", "engine", "pid", "__name__"})


def _is_http_url_without_credentials(value: str) -> bool:
    parts = urlsplit(value)
    return is_http_url(value) and parts.username is None and parts.password is None


def _is_replica_label(value: str) -> bool:
    return (
        bool(value)
        and value.replace("_", "a").isalnum()
        and value.isascii()
        and not value[0].isdigit()
        and value not in _FOLDED_LABELS
    )


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """Where the replica is and how to read it."""

    url: str = setting(
        "http://127.0.0.1:8000",
        HTTP_URL,
        "Base URL of the replica (its OpenAI server, vLLM or SGLang): /metrics, /health, /version "
        "(SGLang: /get_server_info) and /v1/models are read under it. A user and password in it are sent as basic auth but never "
        "shown or recorded; an API key from the variable below is the safer way (a URL is seen in "
        "`ps` and shell history).",
    )
    api_key_env: str = setting(
        "VLLM_API_KEY",
        ENV_NAME,
        "Name of the environment variable holding the replica's API key (vllm serve --api-key), "
        'sent as "Authorization: Bearer ...". The key itself never goes in this file. Empty: send '
        "none.",
    )
    engine: str = setting(
        "auto",
        one_of(EngineChoice),
        "The serving engine: auto tells vLLM from SGLang by the families /metrics serves (vllm: or "
        "sglang:); name it (vllm or sglang) where a body holds both or neither. SGLang serves "
        "/metrics only when started with --enable-metrics.",
    )
    scrape_interval_s: float = setting(
        1.0,
        NUMBER_POSITIVE,
        "Seconds between two scrapes of /metrics. The next scrape starts only after the last one "
        "ended.",
    )
    timeout_s: float = setting(
        5.0,
        NUMBER_POSITIVE,
        "Seconds before a request to the replica counts as failed (the pane then shows the data as "
        "stale): the whole answer must have come by then, however slowly the replica sends it.",
    )
    max_scrape_mb: float = setting(
        32.0,
        number_where(
            lambda v: math.isfinite(v) and 0.01 <= v <= 4096,
            "from 0.01 to 4096 (MiB read of one answer at most)",
        ),
        "The most of one answer read, in MiB; past it the scrape fails and says so (a vLLM page is "
        "tens to hundreds of KB; tens of MB means tens of thousands of series, one per LoRA "
        "adapter or label).",
    )
    # Not a key of the file: read from the variable api_key_env names, once settings are checked.
    api_key: str | None = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class SloSection:
    """The `[slo]` keys as the settings file holds them, targets in milliseconds; `Slo` holds the
    same SLO in seconds (`slo_from_keys`)."""

    ttft_ms: float = setting(
        500.0,
        NUMBER_POSITIVE,
        "Time to first token: pXX must stay under this many milliseconds.",
    )
    ttft_percentile: float = setting(99.0, PERCENTILE)
    itl_ms: float = setting(
        50.0,
        NUMBER_POSITIVE,
        "Inter-token latency (every gap between streamed tokens): pXX under this many "
        "milliseconds.",
    )
    itl_percentile: float = setting(99.0, PERCENTILE)


SLO_KEYS_MS: dict[str, str] = {"ttft_ms": "ttft_s", "itl_ms": "itl_s"}
"""The `[slo]` keys held in milliseconds, each with the `Slo` field (in seconds) it becomes."""

SLO_KEYS: tuple[str, ...] = tuple(f.name for f, _ in declared_settings(SloSection))
"""The `[slo]` keys, in the order the sample file and recorded settings list them."""


def _in_seconds(values: Mapping[str, float]) -> dict[str, float]:
    """`[slo]` keys' values as `Slo` fields: the one place their milliseconds become seconds."""
    return {
        SLO_KEYS_MS.get(key, key): value / 1e3 if key in SLO_KEYS_MS else value
        for key, value in values.items()
    }


DEFAULT_SLO = Slo(**_in_seconds(dataclasses.asdict(SloSection())))
"""The SLO without a settings file: TTFT p99 under 500 ms, inter-token latency p99 under 50 ms."""


def slo_from_keys(values: Mapping[str, float], base: Slo = DEFAULT_SLO) -> Slo:
    """``base`` with `[slo]` keys' values put in, their milliseconds made seconds."""
    return dataclasses.replace(base, **_in_seconds(values))


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

    long_s: float = setting(60.0, NUMBER_POSITIVE)
    short_s: float = setting(10.0, NUMBER_POSITIVE)


@dataclass(frozen=True, slots=True)
class GpuSettings:
    """Which GPUs to show: NVML indices, or every visible one when empty."""

    indices: tuple[int, ...] = setting(
        (),
        Rule(_is_index_list, "a list of GPU indices (integers ≥ 0)"),
        "NVML indices of the GPUs to show; empty shows every GPU this process can see "
        "(CUDA_VISIBLE_DEVICES is honoured).",
    )


@dataclass(frozen=True, slots=True)
class LoadSettings:
    """The load probe: what each request looks like, the caps on the dial, and where it may go."""

    endpoint: Endpoint = setting(
        "completions",
        one_of(Endpoint),
        'Which API it streams from: "completions" (/v1/completions) or "chat" '
        "(/v1/chat/completions).",
    )
    prompt_form: PromptForm = setting(
        "auto",
        one_of(PromptForm),
        'How prompts are sent: "token_ids" (exact lengths, no tokenizer needed; completions only), '
        '"text" (common words, about one token each), or "auto": token ids on completions, text on '
        "chat.",
    )
    max_concurrency: int = setting(
        64,
        WHOLE_POSITIVE,
        "Caps on the dial: the most requests in flight, and the highest open-loop rate in "
        "requests/s. Nothing the operator or a sweep asks for goes past them.",
    )
    max_rate_rps: float = setting(50.0, NUMBER_POSITIVE)
    initial_concurrency: int = setting(
        1,
        WHOLE_NOT_NEGATIVE,
        "Requests kept in flight (closed loop) when the probe is turned on; at most "
        "max_concurrency.",
    )
    burstiness: float = setting(
        1.0,
        NUMBER_POSITIVE,
        "Open loop: gaps between requests are gamma-distributed with this shape, as in `vllm bench "
        "serve --burstiness`: 1 is a Poisson process, below 1 burstier, above 1 more even.",
    )
    prompt_distribution: Distribution = setting(
        "fixed",
        one_of(Distribution),
        'Prompt lengths in tokens, drawn per request: "fixed", "uniform" (prompt_tokens ± spread), '
        '"normal" or "lognormal" (spread is the standard deviation).',
    )
    prompt_tokens: int = setting(512, WHOLE_POSITIVE)
    prompt_spread_tokens: int = setting(
        0,
        WHOLE_NOT_NEGATIVE,
        "Spread of the prompt lengths in tokens; 0 makes every prompt prompt_tokens long.",
    )
    output_distribution: Distribution = setting(
        "fixed",
        one_of(Distribution),
        "Output lengths in tokens (max_tokens of each request), drawn the same ways as prompts.",
    )
    output_tokens: int = setting(128, WHOLE_POSITIVE)
    output_spread_tokens: int = setting(
        0,
        WHOLE_NOT_NEGATIVE,
        "Spread of the output lengths in tokens.",
    )
    shared_prefix_tokens: int = setting(
        0,
        WHOLE_NOT_NEGATIVE,
        "A prefix of this many tokens opens every synthetic prompt, before the prompt_tokens drawn "
        "above (as `vllm bench serve --random-prefix-len`); 0: none. Requests that share it (see "
        "the ratio) send the same tokens, so the replica's prefix cache can reuse their KV blocks "
        "(only whole blocks: a prefix of 70 tokens caches 64 with 16-token blocks); the others "
        "send random ones.",
    )
    shared_prefix_ratio: float = setting(
        1.0,
        RATIO,
        "The share of requests, from 0 to 1, whose prefix is the shared one: the KV pane's prefix "
        "hit ratio tends to ratio × (cached prefix tokens) / (prompt length). Not with "
        "prompts_file.",
    )
    prompts_file: str = setting(
        "",
        PATH,
        "A JSONL file of prompts to replay instead of synthetic ones, in order and in a cycle: one "
        '{"prompt": "text" or [token ids]} or {"messages": [{"role": ..., "content": ...}]} per '
        'line, with an optional "output_tokens". A relative path is taken from the working '
        "directory. Empty: synthetic prompts of the lengths above.",
    )
    ignore_eos: bool = setting(
        True,
        BOOLEAN,
        "Ask the replica to ignore end-of-sequence so every request generates exactly its output "
        "length.",
    )
    request_timeout_s: float = setting(
        300.0,
        NUMBER_POSITIVE,
        "Seconds one request may take, first byte to last, before it counts as a timeout.",
    )
    allow_remote_load: bool = setting(
        False,
        BOOLEAN,
        "Allow load on a replica that is not on this machine (not localhost / 127.0.0.0/8 / ::1). "
        "Load on a production replica is a decision, not an accident: also settable with "
        "--allow-remote-load.",
    )
    workers: int | Literal["auto"] = setting(
        "auto",
        Rule(
            lambda v: isinstance(v, str) or is_whole(v),
            '"auto" or a whole number',
            _is_workers,
            f'"auto", or a whole number from 1 to {MAX_PROBE_WORKERS}',
            keeps_int=True,
        ),
        "Worker processes the probe spreads its streams over, each an event loop on a core of its "
        'own, so the client, not the replica, is never what bends TTFT and ITL. "auto": one worker '
        "per 64 streams that max_concurrency allows (rounded up), at most one per CPU this process "
        "may use, at least one; or a whole number from 1 to 64 (no more than max_concurrency). The "
        'probe says when its own lag bends its numbers (docs/probe.md: "When the probe is the '
        'bottleneck").',
    )
    output_dither_ratio: float = setting(
        0.125,
        number_where(lambda v: 0 <= v <= 0.5, "from 0 to 0.5 (0: exact lengths)"),
        "In a closed loop, each request's output length moves by a random whole number of tokens "
        "within this share of it, evenly either way (the mean and the mix of work unchanged): "
        '0.125 sends a "fixed" 128 as 112 to 144. Streams of exactly alike requests keep whatever '
        "phase they started with, so the load would remember how it was reached and drift into "
        "streams that prefill together; dithered, TTFT at N streams is the same however N was "
        "reached. 0: exact lengths.",
    )


@dataclass(frozen=True, slots=True)
class LaunchSettings:
    """The replica slotop starts and restarts: its command, and the dials it was given."""

    command: tuple[str, ...] = setting(
        (),
        Rule(is_argv, "a list of non-empty strings (the program, then its arguments)"),
        "The program and its arguments, as a list (never a shell string), without the three dial "
        "flags below, which slotop adds itself in the engine's words (a command running "
        "sglang.launch_server or `sglang serve` is SGLang's, else vLLM's; [replica] engine names "
        "it); the replica must listen on [replica] url. Empty: "
        "the simulated replica (`slotop sim`) on [replica] url's host and port, which is what "
        "`slotop demo` runs. For example:\n"
        'command = ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"]',
    )
    env: tuple[tuple[str, str], ...] = setting(
        (),
        ENV_TABLE,
        'Environment variables added to slotop\'s own for the replica, as NAME = "value" pairs.',
    )
    working_dir: str = setting(
        "",
        PATH,
        "Folder the replica starts in. Empty: slotop's working directory.",
    )
    log_file: str = setting(
        "",
        PATH,
        "File the replica's stdout and stderr are appended to; slotop shows its tail when a start "
        "fails. Empty: replica-<port>.log in slotop's state folder ($XDG_STATE_HOME/slotop).",
    )
    health_timeout_s: float = setting(
        600.0,
        NUMBER_POSITIVE,
        "Seconds a start may take until /health answers 200; past it the replica is killed (and a "
        "restart starts it again with the previous dials). Loading a large model and capturing "
        "CUDA graphs is slow.",
    )
    stop_grace_s: float = setting(
        30.0,
        NUMBER_POSITIVE,
        "Seconds between SIGTERM and SIGKILL when slotop stops the replica's process group.",
    )
    drain_timeout_s: float = setting(
        30.0,
        NUMBER_POSITIVE,
        "Seconds a restart waits for the probe's in-flight requests to end before it stops the "
        "replica.",
    )
    kv_cache_dtype: str = setting(
        "auto",
        string_where(lambda v: bool(v.strip()), "not empty"),
        "The dials, as the replica is started with them: --kv-cache-dtype (auto follows the "
        "model's dtype; fp8 holds about twice the tokens of 16-bit), passed on every start.",
    )
    max_num_seqs: int = setting(
        0,
        WHOLE_NOT_NEGATIVE,
        "--max-num-seqs (SGLang: --max-running-requests), the most sequences in one batch; 0 leaves "
        "the replica's default (flag not passed).",
    )
    max_num_batched_tokens: int = setting(
        0,
        WHOLE_NOT_NEGATIVE,
        "--max-num-batched-tokens (SGLang: --chunked-prefill-size), the token budget of one step "
        "(chunked prefill); 0 leaves the default.",
    )
    restart_command: tuple[str, ...] = setting(
        (),
        ARGV,
        "For a replica slotop did not start (systemd, a container): a command that restarts it "
        "with new dials, run without a shell. In an argument, {kv_cache_dtype}, {max_num_seqs} and "
        "{max_num_batched_tokens} become the values; an argument that is exactly {dial_args} "
        "becomes the dial flags, each a separate argument. slotop then waits for /health and "
        "verifies as for its own. Empty: none (only a replica slotop started can be restarted). "
        "For example:\n"
        'restart_command = ["sudo", "/usr/local/bin/restart-vllm", "{dial_args}"]',
    )
    quality_prompts_file: str = setting(
        "",
        string_where(
            lambda v: v == "" or Path(v).is_file(),
            "an existing JSONL prompts file (a relative path is taken from the working directory): fix the path, or leave it empty for the built-in prompts",
        ),
        "The quality check a restart that changes kv_cache_dtype runs: the same prompts, greedy, "
        "before and after, compared token by token (and by log-probability where the replica "
        'returns it). A JSONL file, one {"prompt": "text" or [token ids], "max_tokens": N, "name": '
        '"..."} (or a plain string) a line, that replaces the built-in set; a relative path is '
        "taken from the working directory. Empty: the built-in set of 8 prompts (prose, facts, "
        "arithmetic, code, JSON, translation, a long context, token ids). `slotop restart "
        "--no-quality-check` skips the check.",
    )


@dataclass(frozen=True, slots=True)
class TuiSettings:
    """The screen: how often it refreshes, and the load `slotop demo` starts with."""

    refresh_s: float = setting(
        1.0,
        NUMBER_POSITIVE,
        "Seconds between refreshes of the screen, the GPU reading and the probe's figures.",
    )
    demo_concurrency: int = setting(
        2,
        WHOLE_POSITIVE,
        "Requests kept in flight by the probe that `slotop demo` turns on (at most [load] "
        "max_concurrency).",
    )


@dataclass(frozen=True, slots=True)
class SweepSettings:
    """The concurrency sweep: its steps, how long each is measured, and when it stops early."""

    concurrency: tuple[int, ...] = setting(
        (),
        Rule(
            lambda v: (
                isinstance(v, list | tuple)
                and all(isinstance(c, int) and not isinstance(c, bool) and c >= 1 for c in v)
            ),
            "a list of concurrencies (integers ≥ 1), or empty for 1, 2, 4, …",
        ),
        "The concurrencies to visit, in order. Empty: start_concurrency, then × growth_factor each "
        "step (1, 2, 4, 8, …) up to max_concurrency, ending on the cap itself.",
    )
    start_concurrency: int = setting(
        1,
        WHOLE_POSITIVE,
        "First step of the geometric ramp.",
    )
    growth_factor: float = setting(
        2.0,
        GREATER_THAN_1,
        "Each geometric step is the last one times this (rounded up), so 2 doubles the load per "
        "step.",
    )
    max_concurrency: int = setting(
        0,
        WHOLE_NOT_NEGATIVE,
        "Highest concurrency the sweep visits; 0: [load] max_concurrency, which it never exceeds.",
    )
    warmup_s: float = setting(
        5.0,
        NUMBER_NOT_NEGATIVE,
        "Seconds each step runs before it is measured, at least; it also waits for the load to "
        "settle (the streams the step added have ended their opening requests, and those sent with "
        "them).",
    )
    dwell_s: float = setting(
        20.0,
        NUMBER_POSITIVE,
        "Seconds each step is measured, at least: it goes on while the step is undecided, that is "
        "while the 95% interval of TTFT or ITL at the SLO's percentile (from the step's own "
        "requests) straddles its target.",
    )
    min_requests: int = setting(
        10,
        WHOLE_POSITIVE,
        "The fewest requests a step is judged on, however clear its intervals.",
    )
    max_dwell_s: float = setting(
        120.0,
        NUMBER_POSITIVE,
        "Seconds a step may dwell at most while it is undecided; past it the step stays undecided: "
        "shown with its intervals, never recommended, and (unless it broke a rule) the sweep goes "
        "on to the next step, which is likelier to decide.",
    )
    max_follow_s: float = setting(
        0.0,
        NUMBER_NOT_NEGATIVE,
        "Seconds a step may wait past its dwell for the requests sent inside it to end, so their "
        "latencies count whole; the load stays on meanwhile. 0: as long as the step's dwell.",
    )
    knee_gain_ratio: float = setting(
        0.1,
        RATIO,
        "The knee: a step is past it when throughput rose by less than this share of the load's "
        "rise (0.1: doubling the concurrency bought under 10% more output tokens/s). The sweep "
        "stops there.",
    )
    queue_waiting_requests: float = setting(
        1.0,
        NUMBER_POSITIVE,
        "Requests waiting at the replica, on average over the dwell, at which the queue counts as "
        'grown and the sweep stops. The dashboard\'s "binds:" line counts a queue from the same '
        "number.",
    )
    kv_full_ratio: float = setting(
        0.9,
        ABOVE_0_AT_MOST_1,
        "KV-cache usage (0..1) at which the cache counts as full when slotop names what binds: the "
        'sweep, its report and the dashboard (the "binds:" line and the red KV bar) all read this '
        "one value.",
    )
    max_error_ratio: float = setting(
        0.05,
        RATIO,
        "Share of failed requests in a step above which the sweep stops.",
    )
    allow_preemptions: bool = setting(
        False,
        BOOLEAN,
        "Keep going when the replica preempts requests (by default a preemption stops the sweep: "
        "the KV cache is full and requests are recomputed).",
    )
    refine: bool = setting(
        False,
        BOOLEAN,
        "After the ramp breaks, bisect between the operating point and the step that broke, one "
        "measured step each (a ramp of 1, 2, 4, 8, 16 that breaks at 16 tries 12, then 14 or 10, "
        "...), so the doubling leaves no load unused. `slotop sweep --refine` turns it on; `slotop "
        "tune` always.",
    )
    refine_resolution_ratio: float = setting(
        0.1,
        number_where(lambda v: 0 <= v < 1, "at least 0, below 1"),
        "A refined sweep stops once the operating point and the break are adjacent, or at most "
        "this share of the operating point apart (0.1: within 10%).",
    )


TUNE_DIALS: tuple[str, ...] = ("kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens")
"""The dials `slotop tune` may change, in the names `[tune] dials` takes."""


@dataclass(frozen=True, slots=True)
class TuneSettings:
    """`slotop tune`: how long it may take, which dials it may turn, and what a KV dtype must keep."""

    budget_min: float = setting(
        60.0,
        NUMBER_POSITIVE,
        "Minutes the whole tune may take (its --budget-min); no candidate starts that would not "
        "end in it.",
    )
    dials: tuple[str, ...] = setting(
        TUNE_DIALS,
        Rule(
            is_string_list,
            "a list of dial names",
            lambda v: len(set(v)) == len(v) and all(n in TUNE_DIALS for n in v),
            f"each of {', '.join(TUNE_DIALS)} at most once (empty: tune changes none)",
        ),
        "The dials it may change (its --dials): kv_cache_dtype, max_num_seqs, "
        "max_num_batched_tokens.",
    )
    max_candidates: int = setting(
        4,
        WHOLE_POSITIVE,
        "Most candidate configurations it tries besides the replica's own dials.",
    )
    quality_min_match_ratio: float = setting(
        0.9,
        RATIO,
        "A smaller KV dtype is kept only when the greedy quality check finds at least this share "
        "of its output tokens identical position by position to the original dtype's (0..1).",
    )


@dataclass(frozen=True, slots=True)
class RestartSettings:
    """The before/after of a restart: how long `slotop restart` measures each side, and how many
    requests a side needs before its table is worth reading."""

    dwell_s: float = setting(
        30.0,
        NUMBER_POSITIVE,
        "Seconds `slotop restart` measures each side (its --dwell), at least: a side also spans "
        "twelve of its requests' lifetimes, so that its noise can be estimated "
        "(docs/before-after.md).",
    )
    min_requests: int = setting(
        50,
        WHOLE_POSITIVE,
        'Requests a side needs: the dashboard\'s panel says "measuring: n of m requests" until the '
        "new dials have ended this many (and spanned twelve request lifetimes), and takes as many "
        "of the old dials' last ones; a side with fewer is noted. A p99 is judged only from about "
        "200 requests.",
    )
    max_dwell_s: float = setting(
        300.0,
        NUMBER_POSITIVE,
        "The longest `slotop restart` measures a side, however long its requests take.",
    )


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """The session recording: whether it is on, where it goes, how much of the probe it keeps, and
    how large a file and the folder may grow."""

    record: bool = setting(True, BOOLEAN)
    folder: str = setting(
        "",
        Rule(is_string, "a string (a folder, or empty)"),
        "Folder for the recordings; empty: $XDG_STATE_HOME/slotop/sessions, or "
        "~/.local/state/slotop/sessions when XDG_STATE_HOME is unset. Files are named by start "
        "time, replica host-port and command.",
    )
    itl_gaps: bool = setting(
        False,
        BOOLEAN,
        "Keep every inter-token gap of every probe request (exact, about 5 bytes a gap: tens of MB "
        "an hour under load). false pools each second's gaps in 1% log buckets, which keeps an "
        "hour of a loaded replica within about 10 MB and its ITL percentiles within 0.5%.",
    )
    max_file_mb: float = setting(
        64.0,
        number_where(
            lambda v: math.isfinite(v) and (v == 0 or v >= 0.01),
            "0 (one file, however large) or at least 0.01 (MiB)",
        ),
        "A recording file grows to this many MiB, then the session goes on in a next part "
        "(NAME.part2.jsonl, …) that replay and report read with the first as one session. 0: one "
        "file.",
    )
    max_folder_mb: float = setting(
        1024.0,
        number_where(
            lambda v: math.isfinite(v) and (v == 0 or v >= 0.01),
            "0 (no budget: nothing is deleted) or at least 0.01 (MiB)",
        ),
        "The folder's budget in MiB: past it, the oldest sessions in the folder are deleted, "
        "whole, at a session's start and at each new part; never one still being written. 0: "
        "nothing is deleted.",
    )


@dataclass(frozen=True, slots=True)
class FleetSettings:
    """The fleet view: the Prometheus server, its credentials' sources, labels and outlier rules.

    Credentials are named (a file, or an environment variable), never held here.
    """

    prometheus_url: str = setting(
        "",
        string_where(
            lambda v: v == "" or _is_http_url_without_credentials(v),
            "an http:// or https:// URL without a user or password (credentials go in a file or the environment: see the *_file and *_env keys), or empty for none",
        ),
        "The server's base URL, as --prometheus takes it. Empty: none (then give replica URLs, or "
        "--discover). Never put a user or password in it: name a file or a variable below.",
    )
    bearer_token_file: str = setting(
        "",
        PATH,
        'A bearer token sent as "Authorization: Bearer ...": read from this file (its first line) '
        "or from this environment variable. Never on the command line, never written to a log. "
        "Empty: none.",
    )
    bearer_token_env: str = setting("", ENV_NAME)
    basic_auth_file: str = setting(
        "",
        PATH,
        'Basic auth, one line "user:password": from this file or this environment variable. Empty: '
        "none. A server takes one kind of credential: set a bearer token or basic auth, not both.",
    )
    basic_auth_env: str = setting("", ENV_NAME)
    tls_verify: bool = setting(
        True,
        BOOLEAN,
        "Check the server's TLS certificate (https URLs). false accepts any certificate: a test "
        "server only.",
    )
    ca_file: str = setting(
        "",
        PATH,
        "A PEM file of CA certificates to check it against instead of the system's. Empty: the "
        "system's.",
    )
    query_timeout_s: float = setting(
        10.0,
        NUMBER_POSITIVE,
        "Seconds a query may run (sent to the server as its own timeout); past it the rows go "
        "stale.",
    )
    replica_labels: tuple[str, ...] = setting(
        ("job", "instance"),
        Rule(
            is_string_list,
            "a list of label names",
            lambda v: bool(v) and all(_is_replica_label(n) for n in v) and len(set(v)) == len(v),
            "at least one Prometheus label name (letters, digits, _; not le, engine, pid or "
            "__name__), each once",
        ),
        "The labels that tell replicas of one model apart: target labels, which `up` carries too. "
        "Data-parallel engines (the engine label) fold into their replica.",
    )
    model_label: str = setting(
        "model_name",
        string_where(
            _is_replica_label,
            "a Prometheus label name (letters, digits, _; not le, engine, pid or __name__)",
        ),
        "The label naming a replica's model; a model's row merges its replicas' histogram buckets.",
    )
    direct_from_instance: bool = setting(
        False,
        BOOLEAN,
        "Take each replica's instance label (host:port) as its own URL, so a drill-in (Enter) may "
        "also probe and restart it ([load] and [launch] rules apply). false: only the replica at "
        "[replica] url.",
    )
    slow_ratio: float = setting(
        2.0,
        GREATER_THAN_1,
        "A replica is flagged slow when its TTFT at the SLO percentile is at least this many times "
        "its model's median and its bucket lies wholly above that median (models of 3 replicas or "
        "more).",
    )
    skew_kv_ratio: float = setting(
        0.25,
        ABOVE_0_AT_MOST_1,
        "Flagged skewed when its KV usage is this far (0..1) from its model's median KV usage...",
    )
    skew_running_ratio: float = setting(
        2.0,
        GREATER_THAN_1,
        "...or it runs this many times more (or fewer) requests than the median, 2 requests apart "
        "at least.",
    )


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting slotop reads, with where it came from."""

    replica: ReplicaSettings = section(ReplicaSettings())
    slo: Slo = section(
        DEFAULT_SLO,
        "The latency SLO, each target pinned to a percentile. Throughput is maximised under both.",
        keys=SloSection,
    )
    window: WindowSettings = section(
        WindowSettings(),
        "Rates and percentiles are computed over sliding windows of this many seconds: a long one "
        "for the SLO verdict and a short one to see a change land. short_s must not exceed long_s.",
    )
    gpu: GpuSettings = section(GpuSettings())
    load: LoadSettings = section(
        LoadSettings(),
        "The load probe: slotop's own client, run in its own process, that sends requests of known "
        "shape to the replica at [replica] url and measures each one exactly. It sends nothing "
        "until you turn it on.",
    )
    launch: LaunchSettings = section(
        LaunchSettings(),
        "The replica slotop manages: `slotop launch` starts it as a child in a process group of "
        "its own, and `slotop restart` (or the app's k/n/b keys) stops it and starts it again with "
        "other dials. slotop only ever signals a process it started.",
    )
    tui: TuiSettings = section(TuiSettings())
    sweep: SweepSettings = section(
        SweepSettings(),
        "The concurrency sweep (`slotop sweep`): ramp the probe's concurrency until the SLO "
        "percentile bends, then back off one step. Its SLO is [slo]; its load shape and caps are "
        "[load].",
    )
    tune: TuneSettings = section(
        TuneSettings(),
        "`slotop tune`: the method run for the operator. It sizes the KV cache, sweeps the "
        "replica's own dials, lets what binds name the next dial (a smaller KV dtype, more "
        "sequences, a smaller token budget), restarts, verifies and sweeps each candidate, and "
        "picks the highest goodput under both SLOs. Its sweeps are [sweep]'s, refined; its load is "
        "[load]'s, within its caps.",
    )
    restart: RestartSettings = section(
        RestartSettings(),
        "The before/after of a restart, at the same load: `slotop restart --concurrency N` and the "
        "dashboard's panel after k / n / b. Each difference is marked beyond the run-to-run noise "
        "or not (docs/before-after.md).",
    )
    session: SessionSettings = section(
        SessionSettings(),
        "Every session is recorded (`slotop attach`, `demo`, `launch`, `sweep`, `restart`): one "
        "append-only JSONL file, mode 0600, for `slotop replay` and `slotop report`. The flags "
        "--record FILE and --no-record override these. API keys and [launch] env values are never "
        "written.",
    )
    fleet: FleetSettings = section(
        FleetSettings(),
        "The fleet view (`slotop fleet`): every vLLM replica a Prometheus server scrapes, one row "
        "each.",
    )
    source: str = "built-in defaults"
