"""Send a timed pattern of requests to a replica and record its scheduler gauges as they move.

Used to hold the simulated replica's counting against a real vLLM replica's: the same pattern,
its times given in decode steps and scaled by each replica's own step time, read back through the
same /metrics families (`vllm:num_requests_waiting`, `_running`, `vllm:num_preemptions`,
`vllm:request_queue_time_seconds`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from tests.support.vllm_replica import prompt_token_ids, stream_completion

QUEUE_TIME_FIRST_BUCKET_S = 0.3
"""The lowest bound of vLLM's request-latency buckets, which its queue-time histogram uses."""


@dataclass(frozen=True, slots=True)
class TimedRequest:
    """One request of a pattern: when it is sent (in decode steps), its prompt and output length."""

    at_steps: float
    prompt_tokens: int
    max_tokens: int


@dataclass(frozen=True, slots=True)
class GaugeTrace:
    """What a replica's /metrics said while a pattern ran, and its counters at the end."""

    waiting: tuple[float, ...]
    running: tuple[float, ...]
    preemptions: float
    queue_time_count: float
    queue_time_under_first_bucket: float
    step_s: float


def changes(values: Sequence[float]) -> tuple[float, ...]:
    """The values with repeats in a row dropped: the sequence of states a gauge went through."""
    out: list[float] = []
    for value in values:
        if not out or value != out[-1]:
            out.append(value)
    return tuple(out)


def _sample(text: str, name: str, labels: str = "") -> float:
    """The value of the first sample named `name` whose labels contain `labels`."""
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no sample {name}{{{labels}}} in /metrics")


def measure_step_s(
    url: str, model: str, prompt_tokens: int = 64, tokens: int = 30, first_prompt: int = 900
) -> float:
    """A replica's decode step time, as its own inter-token histogram says over requests run alone
    (three prompts from `first_prompt` on).

    Read on the server: a client may see a step's tokens merged into one chunk."""
    sum_name, count_name = (
        "vllm:inter_token_latency_seconds_sum",
        "vllm:inter_token_latency_seconds_count",
    )
    with httpx.Client(timeout=120.0) as client:
        before = client.get(f"{url}/metrics").text
        for index in range(3):
            record = stream_completion(
                client, url, prompt_token_ids(first_prompt + index, prompt_tokens), tokens, model
            )
            assert record.error is None, record.error
        after = client.get(f"{url}/metrics").text
    gaps = _sample(after, count_name) - _sample(before, count_name)
    assert gaps > 0
    return (_sample(after, sum_name) - _sample(before, sum_name)) / gaps


def run_pattern(
    url: str, model: str, pattern: Sequence[TimedRequest], step_s: float, first_prompt: int = 0
) -> GaugeTrace:
    """Send `pattern` with its times scaled by `step_s`, scraping /metrics every two steps.

    Its requests' prompts are numbered from `first_prompt`: a pattern run again on the same
    replica with prompts it has not seen finds none of its blocks in the prefix cache, and so
    takes the blocks, and meets the preemptions, that it did the first time."""
    before = _counters(url)
    waiting: list[float] = []
    running: list[float] = []
    done = threading.Event()

    def read(client: httpx.Client) -> None:
        text = client.get(f"{url}/metrics").text
        waiting.append(_sample(text, "vllm:num_requests_waiting"))
        running.append(_sample(text, "vllm:num_requests_running"))

    def scrape() -> None:
        with httpx.Client(timeout=30.0) as client:
            while not done.is_set():
                read(client)
                time.sleep(2 * step_s)

    def send(index: int, request: TimedRequest, start: float) -> None:
        delay = start + request.at_steps * step_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        with httpx.Client(timeout=600.0) as client:
            record = stream_completion(
                client,
                url,
                prompt_token_ids(first_prompt + index, request.prompt_tokens),
                request.max_tokens,
                model,
            )
        assert record.error is None, record.error

    with httpx.Client(timeout=30.0) as client:
        read(client)  # before the first request
    scraper = threading.Thread(target=scrape, daemon=True)
    scraper.start()
    start = time.monotonic()
    senders = [
        threading.Thread(target=send, args=(index, request, start), daemon=True)
        for index, request in enumerate(pattern)
    ]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join(600.0)
    time.sleep(4 * step_s)  # the last step's gauges
    done.set()
    scraper.join(30.0)
    with httpx.Client(timeout=30.0) as client:
        read(client)  # after the last
    after = _counters(url)
    return GaugeTrace(
        waiting=tuple(waiting),
        running=tuple(running),
        preemptions=after[0] - before[0],
        queue_time_count=after[1] - before[1],
        queue_time_under_first_bucket=after[2] - before[2],
        step_s=step_s,
    )


def _counters(url: str) -> tuple[float, float, float]:
    """Preemptions, queue-time observations, and those in the first bucket, so far."""
    text = httpx.get(f"{url}/metrics", timeout=30.0).text
    return (
        _sample(text, "vllm:num_preemptions_total"),
        _sample(text, "vllm:request_queue_time_seconds_count"),
        _sample(
            text,
            "vllm:request_queue_time_seconds_bucket",
            f'le="{QUEUE_TIME_FIRST_BUCKET_S}"',
        ),
    )
