"""Shared fixtures: the one real vLLM CPU replica of a test session, and streaming load against it.

Tests marked `vllm` use the `vllm_replica` fixture. Without the vLLM venv (.ci/install-vllm)
they skip, except under CI=true, where they fail: CI must never silently skip the real replica.
`no_strays` fails a test that leaves a process it started running. A test that starts a process
at all must be marked `slow` (or `vllm`), so the quick loop starts none (tests/support/process_guard.py).

Helpers for tests and benches live once in tests/support/ (`from tests.support.vllm_replica import
...`); this file puts the repository root on sys.path so that import works however pytest is run.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path

import pytest

# Where PYTHONDONTWRITEBYTECODE is set (some machines set it for every process), nothing caches
# byte-code: each xdist worker rewrites the asserts of every test module again (some 8 s a
# worker on two cores) and each slotop process the tests start compiles slotop again (0.4 s of
# some 1.9). The tests write their cache (`__pycache__/`, ignored by git); the processes they
# start read it.
sys.dont_write_bytecode = False

_REPO_ROOT = str(Path(__file__).resolve().parents[1])
if _REPO_ROOT not in sys.path:
    # pytest's importlib mode adds nothing to sys.path, and `python -m pytest` adds the current
    # folder only; with the root there, `tests.support` imports as it does from the benches.
    sys.path.insert(0, _REPO_ROOT)

from tests.support import cpu_profile, process_guard  # noqa: E402
from tests.support.replica_procs import live_children  # noqa: E402
from tests.support.sglang_replica import (  # noqa: E402
    SglangFlags,
    SglangReplica,
    build_tiny_model_for_sglang,
    sglang_python,
)
from tests.support.vllm_replica import (  # noqa: E402
    LoadResult,
    ReplicaFlags,
    VllmReplica,
    build_tiny_model,
    drive_load,
    vllm_python,
)


def in_ci() -> bool:
    """Whether the CI environment variable says this is a CI run."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _missing_vllm_reason() -> str | None:
    """Say why the real replica cannot run here, or None when it can."""
    python = vllm_python()
    if python is None or not python.exists():
        return "no vLLM venv (.venv-vllm or $SLOTOP_VLLM_PYTHON); run .ci/install-vllm to create it"
    return None


def _missing_sglang_reason() -> str | None:
    """Say why the real SGLang server cannot run here, or None when it can."""
    python = sglang_python()
    if python is None or not python.exists():
        return (
            "no SGLang venv (.venv-sglang or $SLOTOP_SGLANG_PYTHON); "
            "run .ci/install-sglang to create it"
        )
    return None


_ENGINE_MARKS = {"vllm": _missing_vllm_reason, "sglang": _missing_sglang_reason}

SESSION_SERVERS = {"vllm_replica": "vllm", "sglang_replica": "sglang"}
"""The session fixtures that start a real engine's server, and the xdist group of their users."""


def xdist_groups(tests: Sequence[tuple[str, Collection[str]]]) -> list[str]:
    """Each test's pytest-xdist group, from its node id and the fixtures it asks for: a module
    with a test that asks for an engine's session server runs on one worker with every other
    such module, so that server starts once; any other module keeps to itself, so its module
    fixtures start once, and the modules that start engines of their own spread over the
    workers."""
    engine_of: dict[str, str] = {}
    for nodeid, fixtures in tests:
        module = nodeid.split("::")[0]
        for fixture, engine in SESSION_SERVERS.items():
            if fixture in fixtures:
                engine_of.setdefault(module, engine)
    return [engine_of.get(module, module) for module in (n.split("::")[0] for n, _ in tests)]


def longest_first(groups: Sequence[str], marks: Sequence[Collection[str]]) -> list[int]:
    """The order to hand the tests out in, as indices: first every group with a test that runs a
    real engine (`vllm`, `sglang`), then every group with a `slow` test, then the rest; groups
    and tests keep their order within each. The long groups so start first and the quick ones
    fill in at the end, where xdist's own order (most tests first) left the one-test modules,
    the longest of all, to the end: two workers idled four minutes while a third ran them."""
    rank: dict[str, int] = {}
    for group, marked in zip(groups, marks, strict=True):
        kind = 0 if marked & {"vllm", "sglang"} else 1 if "slow" in marked else 2
        rank[group] = min(rank.get(group, 2), kind)
    return sorted(range(len(groups)), key=lambda index: rank[groups[index]])


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip `vllm` and `sglang` tests where their venv does not exist, unless in CI (where the
    fixture fails); under pytest-xdist's `--dist loadgroup`, group the tests (`xdist_groups`)
    and order them longest first (`longest_first`). This runs before xdist's own hook, which
    reads the groups."""
    if config.pluginmanager.hasplugin("xdist"):
        tests = [(item.nodeid, frozenset(getattr(item, "fixturenames", ()))) for item in items]
        groups = xdist_groups(tests)
        for item, group in zip(items, groups, strict=True):
            item.add_marker(pytest.mark.xdist_group(group))
        marks = [frozenset(mark.name for mark in item.iter_markers()) for item in items]
        items[:] = [items[index] for index in longest_first(groups, marks)]
    if in_ci():
        return
    for mark, missing in _ENGINE_MARKS.items():
        reason = missing()
        if reason is None:
            continue
        for item in items:
            if item.get_closest_marker(mark) is not None:
                item.add_marker(pytest.mark.skip(reason=reason))


def pytest_configure(config: pytest.Config) -> None:
    """Note every process start against the test that made it (`process_guard`); keep the order
    the tests are handed out in to xdist (`longest_first`); let the
    processes the tests start hear Ctrl-C, even where the run itself was started in the
    background by a non-interactive shell (`.ci/run &`), which ignores SIGINT for its jobs and
    for everything they start. A handler (not an ignore) is reset to the default at `exec`,
    where Python puts its own back."""
    process_guard.watch()
    if hasattr(config.option, "loadscopereorder"):
        # xdist hands groups out most tests first unless told to keep the order `longest_first`
        # gave them (its --no-loadscope-reorder)
        config.option.loadscopereorder = False
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Count process starts in each of the test's phases, fixtures' set-up and teardown included;
    with SLOTOP_CPU_PROFILE=FILE, note the test's CPU time there (`cpu_profile`)."""
    process_guard.begin(item.nodeid)
    try:
        with cpu_profile.measured(item.nodeid):
            yield
    finally:
        process_guard.end(item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[object], request: pytest.FixtureRequest
) -> Iterator[None]:
    """Remember a fixture that starts a process, so every test asking for it counts as starting."""
    nodeid = process_guard.current()
    before = len(process_guard.started(nodeid))
    yield
    process_guard.fixture_started(fixturedef.argname, fixturedef.baseid, before, nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Fail, at its teardown, a test that started a process without the `slow` mark."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if call.when != "teardown" or not report.passed:
        return
    marks = {mark.name for mark in item.iter_markers()}
    started = process_guard.started(item.nodeid)
    started += process_guard.through_fixtures(item.nodeid, list(getattr(item, "fixturenames", ())))
    reason = process_guard.verdict(item.nodeid, marks, started)
    if reason is not None:
        report.outcome = "failed"
        report.longrepr = reason


def require_vllm() -> None:
    """Skip the calling test without a vLLM venv, or fail it under CI."""
    reason = _missing_vllm_reason()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def require_sglang() -> None:
    """Skip the calling test without an SGLang venv, or fail it under CI."""
    reason = _missing_sglang_reason()
    if reason is None:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def replica_log_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Folder for replica logs: $SLOTOP_VLLM_LOG_DIR (kept for CI artifacts) or a temp folder."""
    kept = os.environ.get("SLOTOP_VLLM_LOG_DIR")
    if kept:
        path = Path(kept)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("vllm-logs")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama config and tokenizer, generated once per session."""
    require_vllm()
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model") / "tiny-llama")


@pytest.fixture(scope="session")
def vllm_replica(tiny_model_dir: Path, replica_log_dir: Path) -> Iterator[VllmReplica]:
    """One real vLLM replica (64 MiB fp32 KV cache, max-model-len 1024) for the whole session.

    Tests must leave it as they found it: restart your own replica (`VllmReplica(...)`) instead.
    """
    replica = VllmReplica(tiny_model_dir, replica_log_dir / "session-replica.log", ReplicaFlags())
    replica.start()
    try:
        yield replica
    finally:
        replica.stop()


@pytest.fixture
def load_driver() -> Callable[..., LoadResult]:
    """drive_load(url, concurrency, requests, max_tokens, prompt_tokens) as a fixture."""
    return drive_load


@pytest.fixture
def no_strays() -> Iterator[None]:
    """Fail the test if it leaves a process it started running."""
    before = set(live_children())
    yield
    left = set(live_children()) - before
    assert not left, f"stray processes left running: {sorted(left)}"


CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
"""A one-line chat template: the tiny model has none, and both engines refuse chat without one."""

SGLANG_RUNNING_CAP = 4
"""The session's SGLang server runs at most this many requests at once (`--max-running-requests`)."""


@pytest.fixture(scope="session")
def sglang_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama, written with the SGLang venv's Python (no vLLM needed)."""
    require_sglang()
    return build_tiny_model_for_sglang(tmp_path_factory.mktemp("sglang-model") / "tiny-llama")


@pytest.fixture(scope="session")
def sglang_replica(sglang_model_dir: Path, replica_log_dir: Path) -> Iterator[SglangReplica]:
    """One real SGLang CPU server (4,096 tokens of KV, at most 4 running) for the whole session,
    with metrics and a chat template. Tests must leave it as they found it."""
    template = sglang_model_dir.parent / "chat.jinja"
    template.write_text(CHAT_TEMPLATE, encoding="utf-8")
    flags = SglangFlags(
        max_running_requests=SGLANG_RUNNING_CAP, extra_args=(f"--chat-template={template}",)
    )
    replica = SglangReplica(sglang_model_dir, replica_log_dir / "session-sglang.log", flags)
    replica.start()
    try:
        yield replica
    finally:
        replica.stop()
