"""Which test started which process: the quick loop leaves out every test that starts one.

`pytest -m "not slow and not vllm"` is the loop a contributor runs between edits; it stays quick
only if every test that starts a process (a simulated replica, a probe worker, tmux, `slotop` as a
command, a browser) carries the `slow` mark (or `vllm`). The conftest installs `watch()` once; it
wraps `subprocess.Popen` (which asyncio's subprocesses and `subprocess.run` go through) and
`multiprocessing`'s `Process.start`, and notes each start against the test running then, in any of
its phases. A fixture that started a process while it was set up (a module's or the session's
replica) is remembered by name, and every test that asks for it counts as starting one too.

A test that starts a process without the mark fails at its teardown, naming what it started and
the mark to add. With SLOTOP_PROCESS_AUDIT=FILE nothing fails: each test that started a process is
written to FILE as a line `nodeid<TAB>marked<TAB>programs`, for an audit of the whole suite.
"""

from __future__ import annotations

import functools
import multiprocessing.process
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

MARKS = ("slow", "vllm")
"""A test carrying one of these may start processes: the quick loop leaves it out."""
AUDIT_ENV = "SLOTOP_PROCESS_AUDIT"
ONCE_A_MACHINE = frozenset({"fc-list"})
"""Programs a library starts once per machine, not per test: matplotlib lists the fonts with
fc-list the first time it is imported where its font cache does not exist yet (a fresh clone's
first run), in whichever test that happens to be."""

_lock = threading.Lock()
_current: list[str] = []
_started: dict[str, list[str]] = {}
_process_fixtures: dict[tuple[str, str], str] = {}
"""(name, where it is defined: the node id its definition is visible below) → what it started."""
_installed = False


def _program(args: Any) -> str:
    """A short name for what was started: the program and, for Python, its module or script."""
    if isinstance(args, (str, bytes, os.PathLike)):
        words = [os.fsdecode(args)]
    else:
        words = [os.fsdecode(a) for a in args]
    if not words:
        return "?"
    name = Path(words[0].split()[0]).name if words[0].strip() else "?"
    if name.startswith("python") and len(words) > 2 and words[1] == "-m":
        return f"{name} -m {words[2]}"
    return name


def _note(what: str) -> None:
    if what in ONCE_A_MACHINE:
        return
    with _lock:
        if _current:
            _started.setdefault(_current[-1], []).append(what)


def watch() -> None:
    """Wrap process starts so each is noted against the running test (once per interpreter)."""
    global _installed
    if _installed:
        return
    _installed = True
    popen_init: Callable[..., None] = subprocess.Popen.__init__

    @functools.wraps(popen_init)
    def noted_popen_init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        _note(_program(args))
        popen_init(self, args, *rest, **kw)

    subprocess.Popen.__init__ = noted_popen_init  # type: ignore[method-assign]
    process_start = multiprocessing.process.BaseProcess.start

    @functools.wraps(process_start)
    def noted_start(self: multiprocessing.process.BaseProcess) -> None:
        _note(f"multiprocessing ({self.name})")
        process_start(self)

    multiprocessing.process.BaseProcess.start = noted_start  # type: ignore[method-assign]


def begin(nodeid: str) -> None:
    """A test's phases start: starts from now on are its."""
    with _lock:
        _current.append(nodeid)
        _started.pop(nodeid, None)


def started(nodeid: str) -> list[str]:
    """What the test started so far, in order."""
    with _lock:
        return list(_started.get(nodeid, []))


def current() -> str:
    """The test running now ("" between tests)."""
    with _lock:
        return _current[-1] if _current else ""


def fixture_started(name: str, baseid: str, before: int, nodeid: str) -> None:
    """A fixture (`name`, defined at `baseid`) set up while `nodeid` ran started processes if its
    count grew past `before`."""
    with _lock:
        now = _started.get(nodeid, [])
        if len(now) > before:
            _process_fixtures.setdefault((name, baseid), ", ".join(sorted(set(now[before:]))))


def through_fixtures(nodeid: str, fixturenames: list[str]) -> list[str]:
    """The processes a test depends on through the fixtures it asks for that started one (a
    fixture counts where its definition is visible: a module's own below that module)."""
    with _lock:
        return [
            f"{what} (fixture {name})"
            for (name, baseid), what in _process_fixtures.items()
            if name in fixturenames and nodeid.startswith(baseid)
        ]


def end(nodeid: str) -> list[str]:
    """A test's phases ended: what it started, in order."""
    with _lock:
        if _current and _current[-1] == nodeid:
            _current.pop()
        return _started.pop(nodeid, [])


def audit_file() -> Path | None:
    """Where an audit is written, if one was asked for."""
    value = os.environ.get(AUDIT_ENV, "").strip()
    return Path(value) if value else None


def verdict(nodeid: str, marks: set[str], started: list[str]) -> str | None:
    """Why the test fails (it started a process without a mark that lets it), or None; under an
    audit, writes its line instead and never fails it."""
    if not started:
        return None
    marked = bool(marks & set(MARKS))
    programs = sorted(set(started))
    audit = audit_file()
    if audit is not None:
        with audit.open("a", encoding="utf-8") as out:
            out.write(f"{nodeid}\t{int(marked)}\t{', '.join(programs)}\n")
        return None
    if marked:
        return None
    return (
        f"this test started {len(started)} process(es) ({', '.join(programs)}) but is not "
        'marked `slow`: the quick loop (`pytest -m "not slow and not vllm"`) must start none. '
        "Add `@pytest.mark.slow` (or `pytestmark = pytest.mark.slow` for the module), or drive "
        "the code in-process."
    )
