"""A fake probe handle that sends nothing and records what it is told, and one request's record."""

from __future__ import annotations

from slotop.collectors.probe.records import ProbeEvent, ProbeRecord, ProbeStatus


class FakeProbe:
    """Records every command in `calls`, in order, starting with ("start", concurrency or rate).

    The commands after the start are ("concurrency", n), ("rate", (rate_rps, burstiness)) and
    ("stop", None). `status()` answers `status` (None unless given); a probe that must answer more
    (drain its in-flight requests, produce records) subclasses this one. With `closed_loop`, being
    told a rate fails the test: for callers that must only step concurrency.
    """

    def __init__(
        self,
        concurrency: int | None = None,
        rate_rps: float | None = None,
        *,
        status: ProbeStatus | None = None,
        closed_loop: bool = False,
    ) -> None:
        start = concurrency if concurrency is not None else rate_rps
        self.calls: list[tuple[str, object]] = [("start", start)]
        self.reported_status = status
        self.closed_loop = closed_loop
        self.stopped = False

    @property
    def running(self) -> bool:
        return not self.stopped

    @property
    def commands(self) -> list[tuple[str, object]]:
        """The concurrency and rate changes it was told, in order (no start or stop)."""
        return [call for call in self.calls if call[0] in ("concurrency", "rate")]

    @property
    def concurrencies(self) -> list[int]:
        """The concurrency it started at (if one), then each it was told, in order."""
        return [
            value
            for kind, value in self.calls
            if kind in ("start", "concurrency") and isinstance(value, int)
        ]

    def set_concurrency(self, concurrency: int) -> None:
        self.calls.append(("concurrency", concurrency))

    def set_rate(self, rate_rps: float, burstiness: float | None = None) -> None:
        if self.closed_loop:
            raise AssertionError(f"a closed-loop probe was told a rate ({rate_rps} requests/s)")
        self.calls.append(("rate", (rate_rps, burstiness)))

    def stop(self, timeout_s: float = 5.0) -> None:
        self.calls.append(("stop", None))
        self.stopped = True

    def status(self) -> ProbeStatus | None:
        return self.reported_status

    def drain_records(self) -> list[ProbeRecord]:
        return []

    def events(self) -> list[ProbeEvent]:
        return []


def probe_record(step: int, request_id: int, ttft: float, gaps: tuple[float, ...]) -> ProbeRecord:
    """One request that ended after `ttft` and then `gaps`, sent at t = request_id seconds."""
    return ProbeRecord(
        request_id=request_id,
        step=step,
        sent_at_s=float(request_id),
        done_at_s=float(request_id) + 1.0,
        in_flight_at_send=1,
        planned_prompt_tokens=16,
        planned_output_tokens=len(gaps) + 1,
        ttft_s=ttft,
        itl_s=gaps,
        e2e_s=ttft + sum(gaps),
        chunk_count=len(gaps) + 1,
        prompt_tokens=16,
        output_tokens=len(gaps) + 1,
        finish_reason="length",
        error=None,
    )


class ScriptedProbe:
    """Requests with known send and end times on a fake clock that only its callers move.

    A request's record arrives once its end has passed; `status()` lists the send times of those
    still streaming (None when `silent`, as a probe whose status is not in yet).
    """

    def __init__(self, requests: list[ProbeRecord], *, now_s: float, silent: bool = False) -> None:
        self.now_s = now_s
        self.pending = sorted(requests, key=lambda r: r.done_at_s)
        self.silent = silent

    def clock(self) -> float:
        return self.now_s

    def sleep(self, seconds: float) -> None:
        self.now_s += seconds

    def tick(self) -> None:
        """One second passes."""
        self.sleep(1.0)

    def status(self) -> ProbeStatus | None:
        if self.silent:
            return None
        streaming = tuple(
            sorted(r.sent_at_s for r in self.pending if r.sent_at_s <= self.now_s < r.done_at_s)
        )
        return ProbeStatus(self.now_s, 0, "closed", 2, None, len(streaming), 0, 0, 0, streaming)

    def drain_records(self) -> list[ProbeRecord]:
        ended = [r for r in self.pending if r.done_at_s <= self.now_s]
        self.pending = [r for r in self.pending if r.done_at_s > self.now_s]
        return ended
