"""Where the suite's CPU goes: each test's CPU time, its own and its processes', in a file.

On four workers the full suite keeps a 2-core machine about 95% busy (some 17 CPU-minutes on a
fast host, 27-32 on slower ones), so its wall time falls where CPU does; this says where. With
SLOTOP_CPU_PROFILE=FILE set, the conftest appends one line per test, `nodeid<TAB>wall_s<TAB>
own_cpu_s<TAB>processes_cpu_s<TAB>worker<TAB>ended_at` (the xdist worker, `main` without one, and
the Unix time the test ended), over the test's whole protocol (its fixtures' set-up and teardown
included):

- own: the test process's user + system time (`getrusage(RUSAGE_SELF)`), every thread of it, so
  a session fixture's background thread counts against whichever test runs beside it;
- processes: the processes it started and waited for (`RUSAGE_CHILDREN`), with their own waited
  children. A process stopped by a session fixture counts against the session's last test on
  that worker, and one whose parent was killed before it could wait (an engine's workers after
  a SIGKILL to its group) counts nowhere; the figures are a floor, not an exact account.

Each xdist worker appends to the same file (one short write a line, O_APPEND). Summarise with
the command below: modules by CPU, then each worker's busy time and when it finished, which says
whether one worker's tail held the run up (whether the machine stood idle, `vmstat` says).

    .venv/bin/python -m tests.support.cpu_profile FILE [--top 30]
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ENV = "SLOTOP_CPU_PROFILE"


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def measured(nodeid: str) -> Iterator[None]:
    """Append the test's wall and CPU seconds to $SLOTOP_CPU_PROFILE, if it is set."""
    path = os.environ.get(ENV)
    if not path:
        yield
        return
    wall, own, children = (
        time.monotonic(),
        _cpu_s(resource.RUSAGE_SELF),
        _cpu_s(resource.RUSAGE_CHILDREN),
    )
    try:
        yield
    finally:
        line = "\t".join(
            (
                nodeid.replace("\t", " "),
                f"{time.monotonic() - wall:.3f}",
                f"{_cpu_s(resource.RUSAGE_SELF) - own:.3f}",
                f"{_cpu_s(resource.RUSAGE_CHILDREN) - children:.3f}",
                os.environ.get("PYTEST_XDIST_WORKER", "main"),
                f"{time.time():.3f}",
            )
        )
        with Path(path).open("a", encoding="utf-8") as out:
            out.write(line + "\n")


@dataclass(frozen=True, slots=True)
class TestCpu:
    """One line of the file: a test's wall and CPU seconds, where it ran and when it ended."""

    nodeid: str
    wall_s: float
    own_cpu_s: float
    processes_cpu_s: float
    worker: str
    ended_at: float

    @property
    def module(self) -> str:
        """The test's file."""
        return self.nodeid.split("::")[0]


def parse(lines: Sequence[str], where: str = "profile") -> list[TestCpu]:
    """The file's tests; ValueError naming the line for one not in the form."""
    tests = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            nodeid, wall, own, children, worker, ended = line.rstrip("\n").split("\t")
            tests.append(
                TestCpu(nodeid, float(wall), float(own), float(children), worker, float(ended))
            )
        except ValueError:
            raise ValueError(
                f"{where}, line {number}: expected nodeid, wall_s, own_cpu_s, processes_cpu_s, "
                f"worker and ended_at separated by tabs, got {line.strip()[:80]!r}"
            ) from None
    return tests


@dataclass(frozen=True, slots=True)
class ModuleCpu:
    """One test module's totals over its tests."""

    module: str
    tests: int
    wall_s: float
    own_cpu_s: float
    processes_cpu_s: float

    @property
    def cpu_s(self) -> float:
        """Its own and its processes' CPU together."""
        return self.own_cpu_s + self.processes_cpu_s


def by_module(tests: Sequence[TestCpu]) -> list[ModuleCpu]:
    """Each module's totals, most CPU first."""
    modules: dict[str, list[TestCpu]] = defaultdict(list)
    for test in tests:
        modules[test.module].append(test)
    rows = [
        ModuleCpu(
            module,
            len(measured),
            math.fsum(t.wall_s for t in measured),
            math.fsum(t.own_cpu_s for t in measured),
            math.fsum(t.processes_cpu_s for t in measured),
        )
        for module, measured in modules.items()
    ]
    return sorted(rows, key=lambda r: r.cpu_s, reverse=True)


@dataclass(frozen=True, slots=True)
class WorkerSpan:
    """One worker's share of the run: its tests' wall time and when its last test ended,
    counted from the run's first start."""

    worker: str
    tests: int
    busy_s: float
    finished_s: float
    last_module: str


def by_worker(tests: Sequence[TestCpu]) -> list[WorkerSpan]:
    """Each worker's busy time and finish, the last to finish first."""
    if not tests:
        return []
    began = min(t.ended_at - t.wall_s for t in tests)
    workers: dict[str, list[TestCpu]] = defaultdict(list)
    for test in tests:
        workers[test.worker].append(test)
    spans = []
    for worker, ran in workers.items():
        last = max(ran, key=lambda t: t.ended_at)
        busy = math.fsum(t.wall_s for t in ran)
        spans.append(WorkerSpan(worker, len(ran), busy, last.ended_at - began, last.module))
    return sorted(spans, key=lambda s: s.finished_s, reverse=True)


def summary(rows: Sequence[ModuleCpu], top: int) -> str:
    """A table of the `top` modules and the whole run's totals."""
    lines = [f"{'cpu_s':>8} {'own_s':>8} {'procs_s':>8} {'wall_s':>8} {'tests':>6}  module"]
    for row in rows[:top]:
        lines.append(
            f"{row.cpu_s:8.1f} {row.own_cpu_s:8.1f} {row.processes_cpu_s:8.1f} "
            f"{row.wall_s:8.1f} {row.tests:6d}  {row.module}"
        )
    own = sum(r.own_cpu_s for r in rows)
    processes = sum(r.processes_cpu_s for r in rows)
    wall = sum(r.wall_s for r in rows)
    tests = sum(r.tests for r in rows)
    lines.append(
        f"{own + processes:8.1f} {own:8.1f} {processes:8.1f} {wall:8.1f} {tests:6d}  "
        f"all {len(rows)} modules"
    )
    return "\n".join(lines)


def worker_summary(spans: Sequence[WorkerSpan]) -> str:
    """A table of the workers: tests, busy seconds, and when each finished after the run began."""
    lines = [f"{'busy_s':>8} {'done_at_s':>9} {'tests':>6}  worker  last module"]
    for span in spans:
        lines.append(
            f"{span.busy_s:8.1f} {span.finished_s:9.1f} {span.tests:6d}  "
            f"{span.worker:<6}  {span.last_module}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.cpu_profile",
        description="Summarise a SLOTOP_CPU_PROFILE file: CPU seconds by test module, most first.",
    )
    parser.add_argument("file", type=Path, help="the file a run wrote with SLOTOP_CPU_PROFILE=FILE")
    parser.add_argument("--top", type=int, default=30, help="modules to list (default 30)")
    args = parser.parse_args(argv)
    try:
        text = args.file.read_text(encoding="utf-8")
        tests = parse(text.splitlines(), str(args.file))
    except (OSError, ValueError) as error:
        parser.exit(2, f"cpu_profile: {error}\n")
    print(summary(by_module(tests), args.top))
    print()
    print(worker_summary(by_worker(tests)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
