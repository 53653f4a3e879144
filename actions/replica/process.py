"""The managed replica as a process group: start it, wait for /health, stop it, read its log.

slotop signals only what it started: the group whose leader is its child, or the one the state
file records, and then only while that PID still has the kernel start time recorded with it.
A replica slotop did not start is restarted through the configured restart command instead.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from slotop.actions.replica.spec import (
    Dials,
    HealthTimeoutError,
    LaunchError,
    LaunchSpec,
    ManagedState,
    ReplicaExitedError,
    read_state,
    write_state,
)
from slotop.collectors.replica import Health, ReplicaClient
from slotop.redact import redact_argv, shown_url

POLL_INTERVAL_S = 0.25
HEALTH_REQUEST_TIMEOUT_S = 2.0
KILL_WAIT_S = 10.0
_TAIL_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class HealthProgress:
    """How a start is going: time spent, the limit, why /health is not 200 yet, the log's last line."""

    elapsed_s: float
    timeout_s: float
    detail: str | None
    log_line: str | None


ProgressCallback = Callable[[HealthProgress], None]


def process_start_ticks(pid: int) -> int | None:
    """The kernel start time of a process (clock ticks since boot), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])  # field 22 of proc(5); fields[0] is field 3


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] == "Z"


def group_exists(pgid: int) -> bool:
    """Whether any process (a zombie included) is left in the process group."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """Whether a process that is not a zombie is left in the process group."""
    proc = Path("/proc")
    if not proc.is_dir():
        return group_exists(pgid)
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def wait_for_health(
    health: Callable[[], Health],
    *,
    timeout_s: float,
    exit_code: Callable[[], int | None],
    log_line: Callable[[], str | None],
    on_progress: ProgressCallback | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    describe_exit: Callable[[int], str] = lambda code: f"exit code {code}",
) -> float:
    """Poll /health until 200 and return the seconds it took; raise if the process ends or time runs out."""
    started = clock()
    while True:
        code = exit_code()
        elapsed = clock() - started
        if code is not None:
            raise ReplicaExitedError(
                f"the replica ended ({describe_exit(code)}) {elapsed:.1f} s after its start, "
                "before /health answered"
            )
        answer = health()
        elapsed = clock() - started
        if answer.healthy:
            return elapsed
        if on_progress is not None:
            on_progress(HealthProgress(elapsed, timeout_s, answer.detail, log_line()))
        if elapsed >= timeout_s:
            raise HealthTimeoutError(
                f"the replica did not answer /health within {timeout_s:g} s "
                f"(last answer: {answer.detail or 'none'}); raise [launch] health_timeout_s "
                "if it is only slow"
            )
        sleep(POLL_INTERVAL_S)


def wait_for_replica(
    spec: LaunchSpec,
    *,
    exit_code: Callable[[], int | None],
    log_line: Callable[[], str | None],
    on_progress: ProgressCallback | None,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    describe_exit: Callable[[int], str] = lambda code: f"exit code {code}",
) -> float:
    """`wait_for_health` on the replica at the spec's URL, bounded by its health timeout."""
    with ReplicaClient(
        spec.url, api_key=spec.api_key, timeout_s=HEALTH_REQUEST_TIMEOUT_S
    ) as client:
        return wait_for_health(
            client.health,
            timeout_s=spec.health_timeout_s,
            exit_code=exit_code,
            log_line=log_line,
            on_progress=on_progress,
            clock=clock,
            sleep=sleep,
            describe_exit=describe_exit,
        )


def read_tail(path: Path, offset: int, lines: int) -> str:
    """The last `lines` lines written to a log after `offset`."""
    try:
        with path.open("rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(offset, size - _TAIL_BYTES))
            text = log.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


_EXCEPTION_LINE = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Exit)): (\S.*)$")
ROOT_CAUSE_TAIL_LINES = 400
"""How far back from a failed start's end its log is searched for the error that ended it."""


def root_cause(log: str) -> str | None:
    """The error a failed start's log names last, past any that only points above itself.

    vLLM ends a failed start with `RuntimeError: Engine core initialization failed. See root
    cause above.`; the engine's own reason (`NotImplementedError: FP8 KV cache on CPU requires
    ...`) comes some sixty lines earlier, under its traceback. None when the log names no error.
    """
    found: str | None = None
    for line in log.splitlines():
        match = _EXCEPTION_LINE.search(line)
        if match is not None and "root cause above" not in match.group(2).lower():
            found = f"{match.group(1)}: {match.group(2).strip()}"
    return found


def read_since(path: Path, offset: int) -> str:
    """Everything written to a log after `offset`."""
    try:
        with path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")
    except OSError:
        return ""


class RestartTarget(Protocol):
    """What a restart needs of a replica: stop, start with dials, wait healthy, show the log."""

    @property
    def url(self) -> str: ...
    @property
    def dials(self) -> Dials | None: ...
    @property
    def last_downtime_s(self) -> float | None: ...
    def stop(self) -> None: ...
    def spawn(self, dials: Dials) -> None: ...
    def wait_healthy(self, on_progress: ProgressCallback | None = None) -> float: ...
    def log_tail(self, lines: int = 40) -> str: ...
    def log_since_start(self) -> str: ...
    def record_downtime(self, downtime_s: float) -> None: ...


class ManagedReplica:
    """The replica slotop starts as its child, in a process group of its own."""

    def __init__(
        self,
        spec: LaunchSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.spec = spec
        self._clock = clock
        self._sleep = sleep
        self._popen: subprocess.Popen[bytes] | None = None
        self._state: ManagedState | None = None
        self._last_downtime_s: float | None = None
        self._log_at: tuple[Path, int] = (spec.log_path, 0)

    @classmethod
    def adopt(
        cls,
        spec: LaunchSpec,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> ManagedReplica:
        """The managed replica with what the state file records, if that process still lives."""
        replica = cls(spec, clock=clock, sleep=sleep)
        state, downtime = read_state(spec.state_path)
        replica._last_downtime_s = downtime
        if state is not None and replica._is_ours(state):
            replica._state = state
            replica._log_at = (Path(state.log_path), state.log_offset)
        elif state is not None:
            write_state(spec.state_path, None, downtime)
        return replica

    @property
    def url(self) -> str:
        """The replica's base URL."""
        return self.spec.url

    @property
    def pid(self) -> int | None:
        """The group leader's PID while slotop holds a replica, else None."""
        return self._state.pid if self._state is not None else None

    @property
    def dials(self) -> Dials | None:
        """The dials the held replica was started with."""
        return self._state.dials if self._state is not None else None

    @property
    def last_downtime_s(self) -> float | None:
        """The downtime the latest restart measured, kept across runs in the state file."""
        return self._last_downtime_s

    @property
    def running(self) -> bool:
        """Whether the replica slotop started is alive."""
        return self._state is not None and self._exit_code() is None

    def record_downtime(self, downtime_s: float) -> None:
        """Keep a measured downtime for the next plan."""
        self._last_downtime_s = downtime_s
        write_state(self.spec.state_path, self._state, downtime_s)

    def _is_ours(self, state: ManagedState) -> bool:
        ticks = process_start_ticks(state.pid)
        if ticks is None:
            return group_exists(state.pid)  # a live group's id cannot be reused as a PID
        return state.start_ticks is None or ticks == state.start_ticks

    def _exit_code(self) -> int | None:
        if self._popen is not None:
            return self._popen.poll()
        if self._state is None:
            return -1
        pid = self._state.pid
        if process_start_ticks(pid) != self._state.start_ticks or _is_zombie(pid):
            return -1
        return None

    def _describe_exit(self, code: int) -> str:
        if self._popen is None:
            return "not slotop's child, so its exit code is unknown"
        if code < 0:
            return f"killed by signal {signal.Signals(-code).name}"
        return f"exit code {code}"

    def spawn(self, dials: Dials) -> None:
        """Start the replica with `dials` in a new process group, its output appended to the log."""
        if self.running:
            raise LaunchError(
                f"the replica slotop started (PID {self.pid}) is still running; stop it first"
            )
        argv = self.spec.argv(dials)
        env = dict(os.environ)
        env.update(self.spec.env)
        log_path = self.spec.log_path
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as log:
                shown = redact_argv(argv)
                header = f"\n=== slotop {time.strftime('%Y-%m-%dT%H:%M:%S%z')}: {shown!r}\n"
                log.write(header.encode())
                log.flush()
                offset = log.tell()
                self._popen = _popen(argv, log, self.spec.working_dir, env)
        except OSError as exc:
            raise LaunchError(
                f"cannot start the replica {argv[0]!r} ({exc.strerror or exc}); check [launch] "
                f"command and working_dir (log: {log_path})"
            ) from None
        pid = self._popen.pid
        self._log_at = (log_path, offset)
        self._state = ManagedState(
            pid=pid,
            start_ticks=process_start_ticks(pid),
            argv=tuple(redact_argv(argv)),  # kept to be shown: its secrets hidden
            dials=dials,
            url=shown_url(self.spec.url),  # kept to be shown: no user info
            log_path=str(log_path),
            log_offset=offset,
            started_at_unix_s=time.time(),
        )
        write_state(self.spec.state_path, self._state, self._last_downtime_s)

    def wait_healthy(self, on_progress: ProgressCallback | None = None) -> float:
        """Wait, bounded by the health timeout, until /health answers 200; return the seconds."""
        return wait_for_replica(
            self.spec,
            exit_code=self._exit_code,
            log_line=lambda: self.log_tail(1) or None,
            on_progress=on_progress,
            clock=self._clock,
            sleep=self._sleep,
            describe_exit=self._describe_exit,
        )

    def start(self, dials: Dials, on_progress: ProgressCallback | None = None) -> float:
        """Spawn and wait healthy; on any failure stop what was started and raise with the log tail."""
        self.spawn(dials)
        try:
            return self.wait_healthy(on_progress)
        except LaunchError as exc:
            tail = self.log_tail()
            self.stop()
            raise type(exc)(f"{exc}; last lines of {self.spec.log_path}:\n{tail}") from None
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM the group, SIGKILL it after the grace period, and wait until it is gone."""
        state = self._state
        if state is None:
            return
        pgid = state.pid
        if self._popen is None and not self._is_ours(state):
            self._forget()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        if not self._wait_gone(pgid, self.spec.stop_grace_s):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            if not self._wait_gone(pgid, KILL_WAIT_S):
                raise LaunchError(
                    f"process group {pgid} survived SIGKILL for {KILL_WAIT_S:g} s; "
                    "check it with `ps -g` before starting the replica again"
                )
        self._forget()

    def _wait_gone(self, pgid: int, limit_s: float) -> bool:
        deadline = self._clock() + limit_s
        while True:
            if self._popen is not None:
                self._popen.poll()  # reap the leader
            if not group_alive(pgid):
                return True
            if self._clock() >= deadline:
                return False
            time.sleep(0.05)

    def _forget(self) -> None:
        self._popen = None
        self._state = None
        write_state(self.spec.state_path, None, self._last_downtime_s)

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the replica wrote since its latest start."""
        path, offset = self._log_at
        return self.spec.scrub(read_tail(path, offset, lines))

    def log_since_start(self) -> str:
        """Everything the replica wrote since its latest start."""
        path, offset = self._log_at
        return self.spec.scrub(read_since(path, offset))


def _popen(
    argv: list[str], log: IO[bytes], cwd: Path | None, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
