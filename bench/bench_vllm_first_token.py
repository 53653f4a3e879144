"""Where a real vLLM's first-token time goes outside the model: the split the sim's API server uses.

Starts the tiny dummy-weight vLLM CPU replica (tests/support/vllm_replica.py) and sends streaming
requests one at a time from a raw-socket client, so nothing overlaps and the client adds almost
nothing. For each kind of request it reads, besides the client's TTFT, vLLM's own histograms over
the same requests (deltas of `_sum / _count`) and prints their means:

    client TTFT       request written -> first chunk with text read          (what a client sees)
    server TTFT       vllm:time_to_first_token_seconds: the frontend's arrival stamp, taken before
                      the chat template and tokenisation, -> the frontend receiving the first output
    queue + prefill   vllm:request_queue_time_seconds + vllm:request_prefill_time_seconds: the
                      engine core's queued stamp -> its first-token stamp (the model's own work)

so `client - server` is what lies outside vLLM's TTFT (HTTP parsing before the arrival stamp;
detokenising, the SSE chunk and the socket after the frontend has the token) and `server - queue
- prefill` the frontend's work inside it (template, tokenising, the hand-offs to and from the
engine core). Text prompts of two lengths give the tokeniser's cost per prompt token; token-id
prompts skip it. Last, the API server process's own CPU time per request and per streamed token
(the engine core runs in a process of its own): the server works through both one at a time, so
at load the tokens it streams delay the requests it has yet to hand over. The absolute figures are
this host's; `sim/timing.py` keeps their proportions and scales them to a GPU host's published
total.

    .venv/bin/python -m bench.bench_vllm_first_token [--requests 40]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.support.vllm_replica import (
    SERVED_MODEL_NAME,
    ReplicaFlags,
    VllmReplica,
    build_tiny_model,
)

_FAMILIES = (
    "vllm:time_to_first_token_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
)
_WORDS = ("the", "of", "and", "to", "in", "is", "it", "that", "for", "on", "with", "as", "was")


@dataclass(frozen=True, slots=True)
class Variant:
    """One kind of request: its endpoint and body."""

    name: str
    path: str
    body: dict[str, object]


def _text(words: int) -> str:
    return " ".join(_WORDS[(i * 7) % len(_WORDS)] for i in range(words))


def variants(long_words: int) -> list[Variant]:
    """Token ids (no tokeniser), short and long text, and a short chat message."""
    common = {
        "model": SERVED_MODEL_NAME,
        "max_tokens": 2,
        "stream": True,
        "ignore_eos": True,
        "temperature": 0.0,
    }
    usage = {"stream_options": {"include_usage": True}}
    return [
        Variant("ids-16", "/v1/completions", {**common, **usage, "prompt": list(range(3, 19))}),
        Variant("text-short", "/v1/completions", {**common, **usage, "prompt": _text(16)}),
        Variant("text-long", "/v1/completions", {**common, **usage, "prompt": _text(long_words)}),
        Variant(
            "chat-short",
            "/v1/chat/completions",
            {**common, **usage, "messages": [{"role": "user", "content": _text(16)}]},
        ),
    ]


def sums(client: httpx.Client) -> dict[str, tuple[float, float]]:
    """(sum, count) of each histogram family now."""
    found: dict[str, list[float]] = {name: [0.0, 0.0] for name in _FAMILIES}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            for name in _FAMILIES:
                if sample.name == f"{name}_sum":
                    found[name][0] += sample.value
                elif sample.name == f"{name}_count":
                    found[name][1] += sample.value
    return {name: (value[0], value[1]) for name, value in found.items()}


def one_request(port: int, variant: Variant, require_text: bool = True) -> tuple[float, int]:
    """Send one streaming request on a fresh connection; return (client TTFT s, prompt tokens)."""
    body = json.dumps(variant.body).encode()
    head = (
        f"POST {variant.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    ttft = -1.0
    prompt_tokens = 0
    pending = b""
    with socket.create_connection(("127.0.0.1", port), timeout=60.0) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        started = time.perf_counter()
        sock.sendall(head + body)
        while True:
            data = sock.recv(65536)
            if not data:
                break
            now = time.perf_counter()
            pending += data
            lines = pending.split(b"\n")
            pending = lines.pop()
            for line in lines:
                if not line.startswith(b"data: {"):
                    continue
                event = json.loads(line[len(b"data: ") :])
                for choice in event.get("choices") or ():
                    text = choice.get("text") or (choice.get("delta") or {}).get("content")
                    if text and ttft < 0:
                        ttft = now - started
                usage = event.get("usage") or {}
                prompt_tokens = int(usage.get("prompt_tokens") or prompt_tokens)
    if ttft < 0 and require_text:
        raise SystemExit(f"{variant.name}: no text in the answer")
    return ttft, prompt_tokens


@dataclass
class Samples:
    """Per-request figures of one kind of request, in milliseconds."""

    client: list[float] = field(default_factory=list)
    server: list[float] = field(default_factory=list)
    engine: list[float] = field(default_factory=list)
    prompt_tokens: int = 0

    def medians(self) -> tuple[float, float, float, float, float, float]:
        """Client, server, engine, outside (client - server), inside (server - engine), API."""
        pairs = zip(self.client, self.server, self.engine, strict=True)
        outside, inside, api = zip(*((c - s, s - e, c - e) for c, s, e in pairs), strict=True)
        return (
            statistics.median(self.client),
            statistics.median(self.server),
            statistics.median(self.engine),
            statistics.median(outside),
            statistics.median(inside),
            statistics.median(api),
        )


def measure(
    port: int, client: httpx.Client, kinds: list[Variant], rounds: int
) -> dict[str, Samples]:
    """Send each kind once per round, in turn, scraping around every request.

    One request between two scrapes gives one observation of each histogram, so a request that a
    busy host delayed is one outlier among medians, and taking the kinds in turn spreads the
    host's changing load over all of them alike.
    """
    for variant in kinds:
        for _ in range(3):
            one_request(port, variant)
    found = {variant.name: Samples() for variant in kinds}
    before = sums(client)
    for _ in range(rounds):
        for variant in kinds:
            ttft, prompt_tokens = one_request(port, variant)
            after = sums(client)
            delta = {name: after[name][0] - before[name][0] for name in _FAMILIES}
            if all(after[name][1] - before[name][1] == 1 for name in _FAMILIES):
                samples = found[variant.name]
                samples.prompt_tokens = prompt_tokens
                samples.client.append(ttft * 1000)
                samples.server.append(delta["vllm:time_to_first_token_seconds"] * 1000)
                samples.engine.append(
                    (
                        delta["vllm:request_queue_time_seconds"]
                        + delta["vllm:request_prefill_time_seconds"]
                    )
                    * 1000
                )
            before = after
    return found


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def api_server_cpu(
    port: int, pid: int, streams: int, tokens: int, rounds: int
) -> tuple[float, float]:
    """The API server process's CPU per request and per streamed token, in milliseconds.

    First `rounds` x `streams` one-token requests one after another (the per-request cost), then
    `rounds` waves of `streams` concurrent requests of `tokens` tokens each; the second's CPU
    less its requests' share, over its tokens, is the cost of each token's chunk. The engine core
    runs in a process of its own and is not counted.
    """
    one = Variant(
        "one-token",
        "/v1/completions",
        {
            "model": SERVED_MODEL_NAME,
            "prompt": list(range(3, 19)),
            "max_tokens": 1,
            "stream": True,
            "ignore_eos": True,
        },
    )
    many = Variant("many", "/v1/completions", {**one.body, "max_tokens": tokens})
    before = process_cpu_s(pid)
    for _ in range(rounds * streams):
        one_request(port, one, require_text=False)
    per_request_ms = (process_cpu_s(pid) - before) / (rounds * streams) * 1000
    before = process_cpu_s(pid)
    for _ in range(rounds):
        with ThreadPoolExecutor(max_workers=streams) as pool:
            list(pool.map(lambda _: one_request(port, many, require_text=False), range(streams)))
    spent_ms = (process_cpu_s(pid) - before) * 1000
    per_token_ms = (spent_ms - per_request_ms * rounds * streams) / (rounds * streams * tokens)
    return per_request_ms, per_token_ms


def main() -> int:
    """Start the replica, measure each variant, print the split."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60, help="requests of each kind")
    parser.add_argument("--long-words", type=int, default=600, help="words in the long prompt")
    args = parser.parse_args()
    # A SIGTERM (a timeout) unwinds like Ctrl-C, so the replica's process group is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="slotop-bench-") as scratch:
        model_dir = build_tiny_model(Path(scratch) / "tiny-llama")
        template = Path(scratch) / "chat.jinja"
        template.write_text(
            "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant:{% endif %}",
            encoding="utf-8",
        )
        flags = ReplicaFlags(extra_args=(f"--chat-template={template}",))
        with VllmReplica(model_dir, Path(scratch) / "vllm.log", flags) as replica:
            print(f"vLLM CPU replica up in {replica.last_startup_s:.0f} s; load {os.getloadavg()}")
            header = (
                f"{'kind':<11} {'prompt':>6} {'client':>8} {'server':>8} {'engine':>8} {'outside':>8} "
                f"{'inside':>8} {'api':>8}   (ms, medians over requests)"
            )
            print(header)
            with httpx.Client(base_url=replica.url, timeout=30.0) as client:
                found = measure(replica.port, client, variants(args.long_words), args.requests)
            rows: dict[str, list[float]] = {}
            for name, samples in found.items():
                client_ms, server_ms, engine_ms, outside, inside, api = samples.medians()
                tokens = float(samples.prompt_tokens)
                rows[name] = [tokens, outside, inside]
                print(
                    f"{name:<11} {tokens:>6.0f} {client_ms:>8.2f} {server_ms:>8.2f} "
                    f"{engine_ms:>8.2f} {outside:>8.2f} {inside:>8.2f} {api:>8.2f}"
                )
            short, long = rows["text-short"], rows["text-long"]
            per_token_us = (long[2] - short[2]) / (long[0] - short[0]) * 1000
            print(f"tokenising: {per_token_us:.2f} us per prompt token (text-long vs text-short)")
            assert replica.pid is not None
            per_request_ms, per_token_ms = api_server_cpu(replica.port, replica.pid, 8, 128, 3)
            print(
                f"API server process CPU: {per_request_ms:.2f} ms per request, "
                f"{per_token_ms * 1000:.0f} us per streamed token (8 streams x 128 tokens)"
            )
            print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
