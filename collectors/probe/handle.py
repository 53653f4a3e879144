"""The parent's handle on the probe process: start it, turn the dial, drain what it measured.

Nothing here blocks on the probe: commands go down a pipe, and a reader thread collects the
batches that come back, so a caller on any thread only ever takes what has already arrived.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import threading
import time
from collections import deque
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from slotop.collectors.errors import ProbeError
from slotop.collectors.probe.loadshape import LoadShape
from slotop.collectors.probe.records import (
    EventKind,
    ProbeBatch,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
)
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.probe.worker import (
    FLUSH_INTERVAL_S,
    Command,
    SetConcurrency,
    SetRate,
    Stop,
    run_worker,
)


def check_concurrency(concurrency: int, shape: LoadShape) -> None:
    """Refuse a concurrency outside 0..max_concurrency."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int):
        raise ProbeError(f"concurrency {concurrency!r}; it must be a whole number")
    if not 0 <= concurrency <= shape.max_concurrency:
        raise ProbeError(
            f"concurrency {concurrency} is outside 0..{shape.max_concurrency} "
            "(max_concurrency in [load] caps it)"
        )


def check_rate(rate_rps: float, burstiness: float | None, shape: LoadShape) -> None:
    """Refuse a rate outside 0..max_rate_rps, or a burstiness that is not above 0."""
    if not (math.isfinite(rate_rps) and 0 <= rate_rps <= shape.max_rate_rps):
        raise ProbeError(
            f"request rate {rate_rps!r} req/s is outside 0..{shape.max_rate_rps:g} "
            "(max_rate_rps in [load] caps it)"
        )
    if burstiness is not None and not burstiness > 0:
        raise ProbeError(f"burstiness {burstiness!r}; it must be above 0 (1 is Poisson)")


class Probe:
    """A running probe process; build it with `Probe.start`."""

    def __init__(
        self,
        process: BaseProcess,
        commands: Connection,
        batches: Connection,
        shape: LoadShape,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._process = process
        self._commands = commands
        self._batches = batches
        self._shape = shape
        self._clock = clock
        self._lock = threading.Condition()
        self._records: deque[ProbeRecord] = deque()
        self._events: list[ProbeEvent] = []
        self._status: ProbeStatus | None = None
        self._batch_count = 0
        self._ended = False
        self._reader = threading.Thread(target=self._read, name="probe-reader", daemon=True)
        self._reader.start()

    @classmethod
    def start(
        cls,
        target: ProbeTarget,
        shape: LoadShape,
        *,
        concurrency: int | None = None,
        rate_rps: float | None = None,
        burstiness: float | None = None,
        flush_interval_s: float = FLUSH_INTERVAL_S,
    ) -> Probe:
        """Spawn the probe at a closed-loop concurrency (default 1) or an open-loop rate."""
        first: Command
        if rate_rps is not None:
            if concurrency is not None:
                raise ProbeError("give a concurrency or a request rate, not both")
            check_rate(rate_rps, burstiness, shape)
            first = SetRate(rate_rps, burstiness)
        else:
            concurrency = 1 if concurrency is None else concurrency
            check_concurrency(concurrency, shape)
            first = SetConcurrency(concurrency)
        context = multiprocessing.get_context("spawn")
        commands_in, commands_out = context.Pipe(duplex=False)
        batches_in, batches_out = context.Pipe(duplex=False)
        process = context.Process(
            target=run_worker,
            args=(target, shape, first, commands_in, batches_out, flush_interval_s),
            name="slotop-probe",
            daemon=True,
        )
        process.start()
        commands_in.close()
        batches_out.close()
        return cls(process, commands_out, batches_in, shape)

    @property
    def pid(self) -> int | None:
        """The probe process's id, for the operator's process list."""
        return self._process.pid

    @property
    def running(self) -> bool:
        """Whether the probe process is alive and has not been stopped."""
        return not self._ended and self._process.is_alive()

    def set_concurrency(self, concurrency: int) -> None:
        """Closed loop at `concurrency`: up launches at once, down lets in-flight requests end."""
        check_concurrency(concurrency, self._shape)
        self._send(SetConcurrency(concurrency))

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        """Open loop at `rate_rps` with gamma gaps (burstiness None keeps the current one)."""
        check_rate(rate_rps, burstiness, self._shape)
        self._send(SetRate(rate_rps, burstiness))

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel in-flight requests, collect their records, and end the process."""
        with contextlib.suppress(OSError, ValueError):  # already gone
            self._commands.send(Stop())
        self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(1.0)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(1.0)
        self._reader.join(timeout_s)
        self._commands.close()

    def drain_records(self) -> list[ProbeRecord]:
        """Every record that arrived since the last drain, in arrival order."""
        with self._lock:
            drained = list(self._records)
            self._records.clear()
        return drained

    def events(self) -> list[ProbeEvent]:
        """Every event so far, oldest first."""
        with self._lock:
            return list(self._events)

    def status(self) -> ProbeStatus | None:
        """The latest counters the probe sent, or None before its first batch."""
        with self._lock:
            return self._status

    def wait_for_batch(self, timeout_s: float) -> bool:
        """Block up to `timeout_s` for the next batch; False on timeout or once the probe ended."""
        with self._lock:
            seen = self._batch_count
            self._lock.wait_for(lambda: self._batch_count != seen or self._ended, timeout_s)
            return self._batch_count != seen

    def __enter__(self) -> Probe:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _send(self, command: Command) -> None:
        if not self.running:
            raise ProbeError("the probe is not running; start it again to send load")
        try:
            self._commands.send(command)
        except (OSError, ValueError) as exc:
            raise ProbeError(f"the probe process is gone ({exc}); start it again") from None

    def _read(self) -> None:
        while True:
            try:
                batch: ProbeBatch = self._batches.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                self._records.extend(batch.records)
                self._events.extend(batch.events)
                if batch.status is not None:
                    self._status = batch.status
                self._batch_count += 1
                self._lock.notify_all()
        self._process.join(2.0)
        code = self._process.exitcode
        with self._lock:
            stopped = any(e.kind is EventKind.STOPPED for e in self._events)
            if not stopped or code not in (0, None):
                self._events.append(
                    ProbeEvent(
                        at_s=self._clock(),
                        kind=EventKind.WORKER_EXITED,
                        step=self._status.step if self._status is not None else -1,
                        detail=f"the probe process ended with exit code {code}",
                    )
                )
            self._ended = True
            self._lock.notify_all()
        self._batches.close()
