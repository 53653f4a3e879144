"""Did a restart take? The dials the replica reports against the ones it was started with.

vLLM: the KV dtype comes from `vllm:cache_config_info`; the batch limits from its start-up log
line `non-default args: {...}` (vLLM exposes them nowhere else). SGLang says all three of itself
at /get_server_info (`kv_cache_dtype`, `max_running_requests`, `chunked_prefill_size`), with its
KV cache in tokens (`max_total_num_tokens`). Either way the API must list a model and generate one
token. A dial the replica does not report is unverified, not wrong: only a reported mismatch (or
an API that does not answer) fails a restart.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx

from slotop.actions.replica.spec import DIAL_NAMES, Dials, dial_words
from slotop.collectors.errors import CollectorError
from slotop.collectors.reading import Reading, read_metrics_text
from slotop.collectors.replica import ReplicaClient, normalize_base_url
from slotop.collectors.snapshot import KvCacheState, kv_cache_state
from slotop.redact import shown_text, shown_url

_ARGS_MARKER = "non-default args: "
SOURCE_CACHE_INFO = "vllm:cache_config_info"
SOURCE_STARTUP_LOG = "start-up log"
SOURCE_SERVER_INFO = "/get_server_info"

SGLANG_DIAL_KEYS: Mapping[str, str] = {
    "kv_cache_dtype": "kv_cache_dtype",
    "max_num_seqs": "max_running_requests",
    "max_num_batched_tokens": "chunked_prefill_size",
}
"""Where SGLang's /get_server_info says each dial."""
SGLANG_KV_TOKENS_KEY = "max_total_num_tokens"
"""SGLang's KV cache in tokens, at /get_server_info."""
SGLANG_SERVER_KEYS = (*SGLANG_DIAL_KEYS.values(), SGLANG_KV_TOKENS_KEY)


@dataclass(frozen=True, slots=True)
class DialCheck:
    """One dial: what it should be, what the replica says it is, and where it said so."""

    name: str
    expected: str
    reported: str | None
    source: str | None

    @property
    def ok(self) -> bool | None:
        """True when it matches, False when it is reported different, None when not reported."""
        if self.reported is None:
            return None
        return self.reported == self.expected


@dataclass(frozen=True, slots=True)
class Verification:
    """The replica's own account of its dials after a start, and what is wrong with it."""

    dials: Dials
    checks: tuple[DialCheck, ...]
    served_models: tuple[str, ...]
    kv: KvCacheState | None
    problems: tuple[str, ...]
    generated: bool | None = None
    kv_tokens: int | None = None
    """SGLang's KV cache in tokens (`max_total_num_tokens`); None for vLLM or when unsaid."""

    @property
    def ok(self) -> bool:
        """Whether nothing reported contradicts the dials and the API answers."""
        return not self.problems

    @property
    def unverified(self) -> tuple[str, ...]:
        """The dials the replica did not report."""
        return tuple(check.name for check in self.checks if check.ok is None)

    def lines(self) -> tuple[str, ...]:
        """The verification in words, one line per dial, then the API and the cache."""
        lines = []
        for check in self.checks:
            if check.ok is None:
                verdict = "not reported by the replica (flag passed, unverified)"
            else:
                mark = "✓" if check.ok else "✗"
                verdict = f"{mark} {check.source} says {check.reported}"
            lines.append(f"{check.name} = {check.expected}: {verdict}")
        models = ", ".join(self.served_models) or "none"
        lines.append(f"/v1/models lists: {models}")
        if self.generated is not None:
            done = "generated a token" if self.generated else "FAILED"
            lines.append(f"a one-token /v1/completions request: {done}")
        kv = self.kv
        if self.kv_tokens is not None:
            lines.append(
                f"KV cache: {self.kv_tokens:,} tokens (/get_server_info's max_total_num_tokens, "
                f"dtype {self.dials.kv_cache_dtype})"
            )
        elif kv is not None and kv.blocks_total is not None:
            lines.append(
                f"KV cache: {kv.blocks_total:,} blocks of {kv.block_size_tokens} tokens "
                f"({kv.size_tokens or 0:,} tokens, dtype {kv.cache_dtype})"
            )
        lines.extend(f"problem: {problem}" for problem in self.problems)
        return tuple(lines)


def startup_args(log_text: str) -> dict[str, object]:
    """The mapping of vLLM's last `non-default args: {...}` log line, empty when there is none."""
    for line in reversed(log_text.splitlines()):
        index = line.find(_ARGS_MARKER)
        if index < 0:
            continue
        try:
            value = ast.literal_eval(line[index + len(_ARGS_MARKER) :].strip())
        except (ValueError, SyntaxError):
            return {}
        return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {}
    return {}


def _reported_dtype(reading: Reading | None) -> tuple[str | None, str | None]:
    """The cache dtype every engine reports, or a problem when engines disagree."""
    if reading is None:
        return None, None
    dtypes = {c.cache_dtype for c in reading.cache_configs if c.cache_dtype is not None}
    if len(dtypes) > 1:
        return None, f"engines report different KV dtypes: {', '.join(sorted(dtypes))}"
    return (dtypes.pop() if dtypes else None), None


def _server_info_check(name: str, wanted: object, info: Mapping[str, object]) -> DialCheck:
    """One dial against SGLang's /get_server_info; a default dial matches whatever SGLang chose,
    which the source names."""
    key = SGLANG_DIAL_KEYS[name]
    if key not in info:
        return DialCheck(name, dial_words(wanted), None, None)
    said = info[key]
    if wanted is None:
        chose = "" if said is None else f" ({key} {said}, SGLang's own choice)"
        return DialCheck(name, "default", "default", f"{SOURCE_SERVER_INFO}{chose}")
    reported = "default" if said is None else str(said)
    return DialCheck(name, dial_words(wanted), reported, SOURCE_SERVER_INFO)


def _whole(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def verify_dials(
    expected: Dials,
    reading: Reading | None,
    served_models: tuple[str, ...],
    startup_log: str,
    errors: tuple[str, ...] = (),
    generated: bool | None = None,
    server_info: Mapping[str, object] | None = None,
) -> Verification:
    """Compare the dials a replica was started with to what its metrics, log and API report
    (SGLang's: what its /get_server_info, `server_info`, says)."""
    if expected.engine == "sglang":
        return _verify_sglang(
            expected, reading, served_models, server_info or {}, errors, generated
        )
    args = startup_args(startup_log)
    problems = list(errors)
    dtype, dtype_problem = _reported_dtype(reading)
    if dtype_problem:
        problems.append(dtype_problem)
    checks = []
    for name in DIAL_NAMES:
        wanted = getattr(expected, name)
        reported: str | None = None
        source: str | None = None
        if name == "kv_cache_dtype" and dtype is not None:
            reported, source = dtype, SOURCE_CACHE_INFO
        elif name in args:
            reported, source = str(args[name]), SOURCE_STARTUP_LOG
        elif args and wanted is None:
            reported, source = "default", SOURCE_STARTUP_LOG  # absent from the non-defaults
        check = DialCheck(name, dial_words(wanted), reported, source)
        if check.ok is False:
            problems.append(
                f"{name}: started with {check.expected}, but the {source} says {reported}"
            )
        checks.append(check)
    if not served_models and not errors:
        problems.append("/v1/models lists no model")
    kv = kv_cache_state(reading) if reading is not None else None
    return Verification(expected, tuple(checks), served_models, kv, tuple(problems), generated)


def _verify_sglang(
    expected: Dials,
    reading: Reading | None,
    served_models: tuple[str, ...],
    info: Mapping[str, object],
    errors: tuple[str, ...],
    generated: bool | None,
) -> Verification:
    problems = list(errors)
    checks = []
    for name in DIAL_NAMES:
        check = _server_info_check(name, getattr(expected, name), info)
        if check.ok is False:
            problems.append(
                f"{name}: started with {check.expected}, but {check.source} says {check.reported}"
            )
        checks.append(check)
    if not served_models and not errors:
        problems.append("/v1/models lists no model")
    kv = kv_cache_state(reading) if reading is not None else None
    return Verification(
        expected,
        tuple(checks),
        served_models,
        kv,
        tuple(problems),
        generated,
        kv_tokens=_whole(info.get(SGLANG_KV_TOKENS_KEY)),
    )


def read_verification(
    url: str, expected: Dials, startup_log: str, *, api_key: str | None, timeout_s: float = 5.0
) -> Verification:
    """Read /metrics and /v1/models once (and SGLang's /get_server_info) and verify `expected`
    against them and the log."""
    errors: list[str] = []
    reading: Reading | None = None
    models: tuple[str, ...] = ()
    info: dict[str, object] | None = None
    with ReplicaClient(url, api_key=api_key, timeout_s=timeout_s) as client:
        try:
            reading = read_metrics_text(client.metrics_text())
        except CollectorError as exc:
            errors.append(f"cannot read /metrics: {exc}")
        try:
            models = client.served_models()
        except CollectorError as exc:
            errors.append(f"cannot read /v1/models: {exc}")
        if expected.engine == "sglang":
            try:
                info = client.server_settings(SGLANG_SERVER_KEYS)
            except CollectorError as exc:
                errors.append(f"cannot read /get_server_info: {exc}")
    generated: bool | None = None
    if models:
        problem = one_token(url, models[0], api_key=api_key, timeout_s=timeout_s * 6)
        generated = problem is None
        if problem is not None:
            errors.append(problem)
    return verify_dials(expected, reading, models, startup_log, tuple(errors), generated, info)


SMOKE_PROMPT_TOKEN_IDS = (11, 12, 13, 14)
"""The prompt of the one-token check: token ids, so no tokenizer or vocabulary is assumed."""


def one_token(
    url: str,
    model: str,
    *,
    api_key: str | None,
    timeout_s: float,
    transport: httpx.BaseTransport | None = None,
) -> str | None:
    """Ask for one greedy token; None when it came back, else what went wrong."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    body = {
        "model": model,
        "prompt": list(SMOKE_PROMPT_TOKEN_IDS),
        "max_tokens": 1,
        "temperature": 0,
    }
    base = normalize_base_url(url)
    # The key, when there is one, is the credential (as ReplicaClient sends it); httpx would
    # replace it with the URL's user info.
    asked = (shown_url(base) if api_key else base) + "/v1/completions"
    target = shown_url(asked)
    try:
        with httpx.Client(timeout=timeout_s, headers=headers, transport=transport) as client:
            response = client.post(asked, json=body)
    except httpx.HTTPError as exc:
        return f"a one-token completion at {target} failed: {type(exc).__name__}: " + shown_text(
            str(exc)
        )
    if response.status_code != 200:
        return (
            f"a one-token completion at {target} answered HTTP {response.status_code}: "
            f"{response.text[:200]!r}"
        )
    try:
        choices = response.json().get("choices")
    except (ValueError, AttributeError):
        choices = None
    if not choices:
        return f"a one-token completion at {target} came back without choices"
    return None


def replica_verifier(
    url: str, *, api_key: str | None, timeout_s: float = 5.0
) -> Callable[[Dials, str], Verification]:
    """A verifier for `apply_restart` that reads the replica at `url`."""

    def verify(expected: Dials, startup_log: str) -> Verification:
        return read_verification(url, expected, startup_log, api_key=api_key, timeout_s=timeout_s)

    return verify
