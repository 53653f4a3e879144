"""What the load probe reports: one record per request, events for every change, a status line."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

Endpoint = Literal["completions", "chat"]
"""Which OpenAI API the probe streams from: `/v1/completions` or `/v1/chat/completions`."""

LoadMode = Literal["closed", "open"]
"""Closed loop keeps N requests in flight; open loop sends at a rate whatever the replica does."""


class ErrorClass(enum.Enum):
    """Why a request failed, coarse enough to count and plot."""

    CONNECT = "connect"
    """No response arrived: refused, reset or closed before the status line."""
    TIMEOUT = "timeout"
    """The request ran past its deadline, or a connect/read/pool timeout fired."""
    HTTP_STATUS = "http_status"
    """The replica answered with a status other than 200."""
    STREAM_CUT = "stream_cut"
    """The stream broke, or ended without its `[DONE]` line."""
    STREAM_ERROR = "stream_error"
    """The stream carried an error event, data that is not JSON, or no token chunk at all."""
    CANCELLED = "cancelled"
    """The probe was stopped while the request was in flight; not a failure of the replica."""


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One request, measured as `vllm bench serve` measures it, with times in seconds.

    `ttft_s` runs from send to the first chunk that carries a token (a chat stream's opening
    role-only chunk carries none); `itl_s` holds every gap between two such chunks; `e2e_s` runs
    from send to the last of them. Token counts come from the stream's usage chunk and are None
    when the replica sent none or a count of zero (docs/probe.md: "How it times a request").
    """

    request_id: int
    step: int
    sent_at_s: float
    done_at_s: float
    in_flight_at_send: int
    planned_prompt_tokens: int | None
    planned_output_tokens: int
    ttft_s: float | None
    itl_s: tuple[float, ...]
    e2e_s: float | None
    chunk_count: int
    prompt_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    error: ErrorClass | None
    error_detail: str = ""
    http_status: int | None = None
    lag_s: tuple[float, ...] | None = None
    """How long each token chunk waited in the probe's socket, from the kernel's receive time to
    the probe's stamp (its own lag); None where the system gives no arrival time."""
    stream: int | None = None
    """Which of the closed loop's streams sent it (a stream sends its next request when this one
    ends); None in an open loop, where every request arrives on its own."""
    opening: bool = False
    """Whether it was its stream's first request after the load rose (a start, `+`, a resume):
    cut to a random share of its output so that streams started together fall out of step. A
    measurement of the steady load leaves openings out and starts once they have ended."""

    @property
    def ok(self) -> bool:
        """Whether the request streamed to its end with at least one token chunk."""
        return self.error is None

    @property
    def counts_as_failure(self) -> bool:
        """Whether the replica or the network failed this request (a stop is not a failure)."""
        return self.error is not None and self.error is not ErrorClass.CANCELLED


class EventKind(enum.Enum):
    """What changed in the probe."""

    STARTED = "started"
    CONCURRENCY_SET = "concurrency_set"
    RATE_SET = "rate_set"
    STOPPED = "stopped"
    WORKER_EXITED = "worker_exited"
    CLIENT_BOUND = "client_bound"
    """The probe fell behind its own reads: its numbers are bent by the client from here."""
    CLIENT_CAUGHT_UP = "client_caught_up"
    """The probe kept up again for a while after it was client-bound."""


LOAD_STEP_KINDS = (EventKind.STARTED, EventKind.CONCURRENCY_SET, EventKind.RATE_SET)
"""The events that begin a load step; the others say the load ended, or how the probe kept up."""


@dataclass(frozen=True, slots=True)
class ProbeEvent:
    """One change of the load, stamped with the time it took effect in the probe process.

    `step` is the index of the load step that begins here; records sent after it carry it.
    `concurrency` and `rate_rps` describe the load from this time on (None where they do not apply).
    `lag_s` is what a CLIENT_BOUND or CLIENT_CAUGHT_UP event was judged on, worst worker: the most
    the probe's own lag added to its p99 TTFT or ITL, or its loop delay p99 where chunk arrivals
    are not observable.
    """

    at_s: float
    kind: EventKind
    step: int
    mode: LoadMode | None = None
    concurrency: int | None = None
    rate_rps: float | None = None
    burstiness: float | None = None
    detail: str = ""
    lag_s: float | None = None


@dataclass(frozen=True, slots=True)
class WorkerLag:
    """One probe worker's own lag over its last `span_s` seconds.

    The loop delay is how late the worker's event loop ran a callback that was due; the chunk lag
    how long a read waited in the socket between its bytes' arrival (the kernel's receive time)
    and the probe's stamp: None where the system gives no arrival time (TLS, other systems). The
    errors are how far that lag moved the p99 TTFT and ITL of the requests that ended in the span.
    `client_bound` is the rule of `slotop.collectors.probe.lag` applied to them.
    """

    worker: int
    span_s: float
    loop_delay_p99_s: float | None
    loop_delay_max_s: float | None
    chunk_lag_p99_s: float | None
    chunk_lag_max_s: float | None
    reads: int
    ttft_error_s: float | None
    itl_error_s: float | None
    client_bound: bool


@dataclass(frozen=True, slots=True)
class ProbeStatus:
    """The probe's counters at one time, sent with every batch of records.

    `in_flight` counts requests sent and not yet ended; a failed one keeps its slot through a
    short backoff, so a dead replica is not hammered. `streaming_sent_at_s` holds the send time of
    every request still waiting for its end, oldest first: a window's end is followed until none
    sent before it is left. `lag` holds each worker's own lag over its last second.
    """

    at_s: float
    step: int
    mode: LoadMode
    target_concurrency: int | None
    rate_rps: float | None
    in_flight: int
    sent_total: int
    done_total: int
    failed_total: int
    streaming_sent_at_s: tuple[float, ...] = ()
    lag: tuple[WorkerLag, ...] = ()
    openings_streaming: int = 0
    """Opening requests (`ProbeRecord.opening`) still streaming: while any is, the load is still
    settling into its steady state, and nothing that measures the steady state begins."""
    settled_at_s: float | None = None
    """Every record still to come ends at or after this time (None: `at_s`). A request still
    open after its last token (the stream not yet closed) ends at that token, which can be before
    `at_s`: records are put in end order across workers only up to here."""

    @property
    def client_bound(self) -> bool:
        """Whether any worker was client-bound over its last second."""
        return any(worker.client_bound for worker in self.lag)


@dataclass(frozen=True, slots=True)
class ProbeBatch:
    """What the probe process sends its parent in one message."""

    records: tuple[ProbeRecord, ...]
    events: tuple[ProbeEvent, ...]
    status: ProbeStatus | None
