"""Load steps and timed requests for before/after tests, and a fake probe whose changes are steps.

A restart pauses the probe (a step at concurrency 0) and resumes it (a step at the old load);
these build the events and the records such a run gives, with every time chosen by the test.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from slotop.collectors.probe.records import (
    ErrorClass,
    EventKind,
    ProbeEvent,
    ProbeRecord,
    ProbeStatus,
)
from tests.support.fake_probe import FakeProbe


def step_started(
    at_s: float, step: int, concurrency: int, kind: EventKind = EventKind.CONCURRENCY_SET
) -> ProbeEvent:
    """A closed-loop load step that began at `at_s`."""
    return ProbeEvent(at_s, kind, step, "closed", concurrency)


def timed_request(
    step: int,
    sent_s: float,
    ttft_s: float,
    gaps_s: tuple[float, ...],
    *,
    error: ErrorClass | None = None,
    done_s: float | None = None,
) -> ProbeRecord:
    """A request sent at `sent_s` whose tokens came after `ttft_s`, then each gap (one token per
    chunk); a failed one (`error`) has no token and ends at `done_s`."""
    e2e = ttft_s + sum(gaps_s)
    return ProbeRecord(
        request_id=round(sent_s * 1000),
        step=step,
        sent_at_s=sent_s,
        done_at_s=done_s if done_s is not None else sent_s + e2e,
        in_flight_at_send=1,
        planned_prompt_tokens=16,
        planned_output_tokens=len(gaps_s) + 1,
        ttft_s=None if error else ttft_s,
        itl_s=() if error else gaps_s,
        e2e_s=None if error else e2e,
        chunk_count=0 if error else len(gaps_s) + 1,
        prompt_tokens=16,
        output_tokens=None if error else len(gaps_s) + 1,
        finish_reason=None if error else "length",
        error=error,
    )


class SteppingProbe(FakeProbe):
    """A fake probe whose start and each concurrency it is told open a load step, stamped on the
    wall clock as the real probe stamps them; its status says the step and the concurrency, with
    nothing in flight (so a restart's drain ends at once)."""

    def __init__(
        self,
        concurrency: int,
        clock: Callable[[], float] = time.time,
        started_at_s: float | None = None,
    ) -> None:
        super().__init__(concurrency, closed_loop=True)
        self._clock = clock
        began = clock() if started_at_s is None else started_at_s
        self.steps = [step_started(began, 0, concurrency, EventKind.STARTED)]

    def set_concurrency(self, concurrency: int) -> None:
        super().set_concurrency(concurrency)
        self.steps.append(step_started(self._clock(), len(self.steps), concurrency))

    def status(self) -> ProbeStatus | None:
        step = self.steps[-1]
        return ProbeStatus(self._clock(), step.step, "closed", step.concurrency, None, 0, 0, 0, 0)

    def events(self) -> list[ProbeEvent]:
        return list(self.steps)
