"""The parent's handle on the probe: start its workers, turn the dial, drain what they measured.

The probe is one or more worker processes (`[load] workers`), each with a share of the streams.
Nothing here blocks on them: commands go down a pipe to each, and a reader thread merges the
batches that come back (`merge.py`), so a caller on any thread only ever takes what has already
arrived, and sees one probe: records in order, one event per change, one status.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing
import multiprocessing.connection
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from slotop.collectors.errors import ProbeError
from slotop.collectors.probe.loadshape import MAX_WORKERS, LoadShape
from slotop.collectors.probe.merge import BatchMerger
from slotop.collectors.probe.process import FLUSH_INTERVAL_S, run_worker
from slotop.collectors.probe.records import (
    EventKind,
    ProbeBatch,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
)
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.probe.worker import (
    Command,
    SetConcurrency,
    SetRate,
    Share,
    Stop,
)

STREAMS_PER_WORKER = 64
"""Streams one worker holds before `auto` adds another: one core keeps a worker's p99 chunk lag
under the client-bound bound to about this many streams at 20 ms between chunks
(bench/bench_probe.py)."""


def usable_cores() -> int:
    """The CPUs this process may run on (its affinity), or the machine's count where unknown."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        with contextlib.suppress(OSError):
            return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def auto_workers(max_concurrency: int, cores: int | None = None) -> int:
    """`workers = auto`: one worker per `STREAMS_PER_WORKER` streams the cap allows, rounded up,
    at most one per usable core, at least one."""
    wanted = math.ceil(max_concurrency / STREAMS_PER_WORKER)
    return max(1, min(wanted, cores if cores is not None else usable_cores(), MAX_WORKERS))


def workers_for(shape: LoadShape) -> int:
    """How many workers a probe of this shape runs: the setting, or `auto_workers`."""
    if shape.workers is not None:
        return shape.workers
    return auto_workers(shape.max_concurrency)


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
    """A running probe: its worker processes and what they sent; build it with `Probe.start`."""

    def __init__(
        self,
        processes: Sequence[BaseProcess],
        commands: Sequence[Connection],
        batches: Sequence[Connection],
        shape: LoadShape,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._processes = tuple(processes)
        self._commands = tuple(commands)
        self._batches = tuple(batches)
        self._shape = shape
        self._clock = clock
        self._lock = threading.Condition()
        self._merger = BatchMerger(len(self._processes))
        self._records: deque[ProbeRecord] = deque()
        self._events: list[ProbeEvent] = []
        self._batch_count = 0
        self._stopping = False
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
        """Spawn the probe's workers at a closed-loop concurrency (default 1) or an open-loop rate."""
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
        shape = shape.with_seed()  # a run's own prompts: none repeats what a last run sent
        count = workers_for(shape)
        context = multiprocessing.get_context("spawn")
        processes, commands, batches = [], [], []
        for index in range(count):
            commands_in, commands_out = context.Pipe(duplex=False)
            batches_in, batches_out = context.Pipe(duplex=False)
            process = context.Process(
                target=run_worker,
                args=(
                    target,
                    shape,
                    first,
                    commands_in,
                    batches_out,
                    flush_interval_s,
                    Share(index, count),
                ),
                name="slotop-probe",
                daemon=True,
            )
            process.start()
            commands_in.close()
            batches_out.close()
            processes.append(process)
            commands.append(commands_out)
            batches.append(batches_in)
        return cls(processes, commands, batches, shape)

    @property
    def pid(self) -> int | None:
        """The first worker's process id, for the operator's process list."""
        return self._processes[0].pid

    @property
    def pids(self) -> tuple[int | None, ...]:
        """Every worker's process id."""
        return tuple(process.pid for process in self._processes)

    @property
    def workers(self) -> int:
        """How many worker processes share the load."""
        return len(self._processes)

    @property
    def running(self) -> bool:
        """Whether every worker is alive and the probe has not been stopped."""
        return not self._ended and all(process.is_alive() for process in self._processes)

    def set_concurrency(self, concurrency: int) -> None:
        """Closed loop at `concurrency`: up launches at once, down lets in-flight requests end."""
        check_concurrency(concurrency, self._shape)
        self._send(SetConcurrency(concurrency))

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        """Open loop at `rate_rps` with gamma gaps (burstiness None keeps the current one)."""
        check_rate(rate_rps, burstiness, self._shape)
        self._send(SetRate(rate_rps, burstiness))

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel in-flight requests, collect their records, and end every worker."""
        self._stopping = True
        for commands in self._commands:
            with contextlib.suppress(OSError, ValueError):  # already gone
                commands.send(Stop())
        deadline = time.monotonic() + timeout_s
        for process in self._processes:
            process.join(max(0.0, deadline - time.monotonic()))
        for process in self._processes:
            if process.is_alive():
                process.terminate()
                process.join(1.0)
            if process.is_alive():
                process.kill()
                process.join(1.0)
        self._reader.join(timeout_s)
        for commands in self._commands:
            commands.close()

    def drain_records(self) -> list[ProbeRecord]:
        """Every record that arrived since the last drain, in order of their ends."""
        with self._lock:
            drained = list(self._records)
            self._records.clear()
        return drained

    def events(self) -> list[ProbeEvent]:
        """Every event so far, oldest first."""
        with self._lock:
            return list(self._events)

    def status(self) -> ProbeStatus | None:
        """The latest counters of the whole probe, or None before every worker has reported."""
        with self._lock:
            return self._merger.status()

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
            for commands in self._commands:
                commands.send(command)
        except (OSError, ValueError) as exc:
            raise ProbeError(f"a probe worker is gone ({exc}); start the probe again") from None

    def _take_released(self) -> None:
        records, events = self._merger.take()
        self._records.extend(records)
        self._events.extend(events)

    def _read(self) -> None:
        open_batches = dict(enumerate(self._batches))
        lost: list[int] = []
        stopped: set[int] = set()  # workers that said they stopped before their pipe closed
        while open_batches:
            ready = multiprocessing.connection.wait(list(open_batches.values()))
            for worker, connection in list(open_batches.items()):
                if connection not in ready:
                    continue
                try:
                    batch: ProbeBatch = connection.recv()
                except (EOFError, OSError):
                    del open_batches[worker]
                    connection.close()
                    if worker not in stopped:
                        lost.append(worker)
                        self._stop_others()
                    with self._lock:
                        self._merger.worker_ended(worker)
                        self._take_released()
                    continue
                if any(event.kind is EventKind.STOPPED for event in batch.events):
                    stopped.add(worker)
                with self._lock:
                    self._merger.add(worker, batch)
                    self._take_released()
                    self._batch_count += 1
                    self._lock.notify_all()
        self._ended_with(lost)

    def _stop_others(self) -> None:
        """A worker is gone: its share of the load is too, so the others stop with it."""
        self._stopping = True
        for commands in self._commands:
            with contextlib.suppress(OSError, ValueError):
                commands.send(Stop())

    def _ended_with(self, lost: list[int]) -> None:
        for process in self._processes:
            process.join(2.0)
        codes = [process.exitcode for process in self._processes]
        with self._lock:
            stopped = any(e.kind is EventKind.STOPPED for e in self._events)
            bad = [i for i, code in enumerate(codes) if code not in (0, None)]
            if lost or bad or not stopped:
                status = self._merger.status()
                self._events.append(
                    ProbeEvent(
                        at_s=self._clock(),
                        kind=EventKind.WORKER_EXITED,
                        step=status.step if status is not None else -1,
                        detail=_exit_words(codes, sorted({*lost, *bad})),
                    )
                )
            self._ended = True
            self._lock.notify_all()


def _exit_words(codes: list[int | None], which: list[int]) -> str:
    if len(codes) == 1:
        return f"the probe process ended with exit code {codes[0]}"
    named = which or list(range(len(codes)))
    ends = ", ".join(f"worker {i} with exit code {codes[i]}" for i in named)
    return f"the probe ended: {ends} (of {len(codes)} workers)"
