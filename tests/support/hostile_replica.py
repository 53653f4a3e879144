"""Replicas that misbehave, on loopback: slow, hung, huge, endless, garbage, backwards, duplicated.

Each kind answers /health, /version and /v1/models as the real vLLM CPU replica did (its captured
answers) and misbehaves on /metrics only, the endpoint the dashboard asks every second:

- `slow`: answers after 10 s (the real page).
- `hang`: sends the headers of a 200 announcing a body, then nothing, for ten minutes.
- `huge`: a 20 MB page, the real one and 50,000 series more (one per LoRA adapter, long labels).
- `endless`: a chunked page that never ends, a megabyte at a time, as fast as it is read.
- `drip`: a chunked page that never ends, one line every 50 ms (each read comes in time).
- `garbage`: 256 KB of random bytes.
- `backwards`: the real page after a load, then the same replica's page after a restart, in turn:
  every counter goes back on every other scrape.
- `duplicate`: the real page with one series given twice.

Run one as a process of its own for a bench: `python -m tests.support.hostile_replica KIND PORT`.
"""

from __future__ import annotations

import argparse
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache

from tests.support.http_answers import Answer, HttpAnswers, Misbehave, Request, http_answers
from tests.support.paths import CAPTURES

KINDS = ("slow", "hang", "huge", "endless", "drip", "garbage", "backwards", "duplicate")
HUGE_SERIES = 50_000
SLOW_S = 10.0
HANG_S = 600.0
DRIP_EVERY_S = 0.05
_TEXT = [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")]
_JSON = [("Content-Type", "application/json")]


def capture(name: str) -> bytes:
    """A real vLLM capture's bytes."""
    return (CAPTURES / name).read_bytes()


REAL_PAGE = "vllm-0.32-cpu-load.txt"


@cache
def huge_page() -> bytes:
    """The real page and HUGE_SERIES series of one family more, about 20 MB in all."""
    labels = ",".join(f'label_{i:02d}="{"v" * 18}-{i:02d}"' for i in range(10))
    lines = [b"# HELP vllm:adapter_requests Requests per LoRA adapter.", b""]
    lines[1] = b"# TYPE vllm:adapter_requests gauge"
    for index in range(HUGE_SERIES):
        lines.append(
            f'vllm:adapter_requests{{adapter="lora-adapter-{index:06d}",{labels},'
            f'model_name="tiny-llama"}} {index % 7}.0'.encode()
        )
    return capture(REAL_PAGE) + b"\n".join(lines) + b"\n"


@cache
def garbage_page() -> bytes:
    """256 KB of random bytes, the same every run."""
    return random.Random(23).randbytes(256 * 1024)


def duplicate_page() -> bytes:
    """The real page with its first `vllm:num_requests_running` series given twice."""
    page = capture(REAL_PAGE)
    line = next(row for row in page.splitlines() if row.startswith(b"vllm:num_requests_running"))
    return page + line + b"\n"


def responder(kind: str) -> Callable[[Request], Answer | Misbehave]:
    """What a replica of `kind` answers each request with."""
    if kind not in KINDS:
        raise ValueError(f"no hostile replica {kind!r}; one of {', '.join(KINDS)}")
    scrapes = 0
    lock = threading.Lock()

    def metrics() -> Answer | Misbehave:
        nonlocal scrapes
        with lock:
            scrapes += 1
            count = scrapes
        if kind == "slow":
            return Misbehave("late", SLOW_S, capture(REAL_PAGE))
        if kind == "hang":
            return Misbehave("headers_then_hang", HANG_S)
        if kind == "huge":
            return Answer(200, huge_page(), tuple(_TEXT))
        if kind == "endless":
            return Misbehave("endless")
        if kind == "drip":
            return Misbehave("drip", DRIP_EVERY_S)
        if kind == "garbage":
            return Answer(200, garbage_page(), tuple(_TEXT))
        if kind == "backwards":
            name = "vllm-0.32-cpu-restart-a.txt" if count % 2 else "vllm-0.32-cpu-restart-b.txt"
            return Answer(200, capture(name), tuple(_TEXT))
        return Answer(200, duplicate_page(), tuple(_TEXT))

    def respond(request: Request) -> Answer | Misbehave:
        path = request.path.split("?")[0]
        if path == "/metrics":
            return metrics()
        if path == "/health":
            return Answer(200, b"")
        if path == "/version":
            return Answer(200, capture("vllm-0.32-cpu-version.json"), tuple(_JSON))
        if path == "/v1/models":
            return Answer(200, capture("vllm-0.32-cpu-models.json"), tuple(_JSON))
        return Answer(404, b"not found")

    return respond


@contextmanager
def hostile_replica(kind: str, port: int = 0) -> Iterator[HttpAnswers]:
    """A replica of `kind` on loopback until the block ends."""
    with http_answers(responder(kind), port) as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    if args.kind == "huge":
        huge_page()  # built before the first scrape asks for it
    with hostile_replica(args.kind, args.port):
        print(f"hostile replica {args.kind} on port {args.port}", flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    main()
