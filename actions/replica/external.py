"""A replica slotop did not start (systemd, a container), restarted through a command template.

slotop signals nothing here: the configured restart command does the stop and the start, run
without a shell, with the dial values as separate arguments. Its output goes to the log file.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from slotop.actions.replica.process import (
    ProgressCallback,
    read_since,
    read_tail,
    wait_for_replica,
)
from slotop.actions.replica.spec import Dials, LaunchError, LaunchSpec, read_state, write_state
from slotop.redact import redact_argv


class CommandReplica:
    """Restarts a replica through `[launch] restart_command`, then waits for /health."""

    def __init__(
        self,
        spec: LaunchSpec,
        current: Dials,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not spec.restart_command:
            raise LaunchError(
                "no [launch] restart_command is set, so slotop cannot restart a replica it did "
                "not start"
            )
        self.spec = spec
        self._dials: Dials | None = current
        self._clock = clock
        self._sleep = sleep
        _, self._last_downtime_s = read_state(spec.state_path)
        self._log_at: tuple[Path, int] = (spec.log_path, 0)

    @property
    def url(self) -> str:
        """The replica's base URL."""
        return self.spec.url

    @property
    def dials(self) -> Dials | None:
        """The dials the replica was last restarted with (the configured ones at first)."""
        return self._dials

    @property
    def last_downtime_s(self) -> float | None:
        """The downtime the latest restart measured."""
        return self._last_downtime_s

    def record_downtime(self, downtime_s: float) -> None:
        """Keep a measured downtime for the next plan."""
        self._last_downtime_s = downtime_s
        write_state(self.spec.state_path, None, downtime_s)

    def stop(self) -> None:
        """Nothing to do: the restart command stops the replica itself."""

    def spawn(self, dials: Dials) -> None:
        """Run the restart command with `dials`; raise with its output when it fails."""
        argv = self.spec.restart_argv(dials)
        log_path = self.spec.log_path
        try:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            with log_path.open("ab") as log:
                log.write(f"\n=== slotop restart command: {redact_argv(argv)!r}\n".encode())
                log.flush()
                self._log_at = (log_path, log.tell())
                result = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.spec.working_dir,
                    timeout=self.spec.health_timeout_s,
                    check=False,
                )
        except subprocess.TimeoutExpired:
            raise LaunchError(
                f"the restart command {argv[0]!r} ran past {self.spec.health_timeout_s:g} s"
            ) from None
        except OSError as exc:
            raise LaunchError(
                f"cannot run the restart command {argv[0]!r} ({exc.strerror or exc}); check "
                "[launch] restart_command"
            ) from None
        self._dials = dials
        if result.returncode != 0:
            raise LaunchError(f"the restart command exited with code {result.returncode}")

    def wait_healthy(self, on_progress: ProgressCallback | None = None) -> float:
        """Wait, bounded by the health timeout, until /health answers 200; return the seconds."""
        return wait_for_replica(
            self.spec,
            exit_code=lambda: None,
            log_line=lambda: None,
            on_progress=on_progress,
            clock=self._clock,
            sleep=self._sleep,
        )

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the restart command wrote."""
        return self.spec.scrub(read_tail(*self._log_at, lines))

    def log_since_start(self) -> str:
        """Everything the restart command wrote."""
        return self.spec.scrub(read_since(*self._log_at))
