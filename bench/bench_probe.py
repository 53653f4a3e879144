"""The probe against `vllm bench serve`, side by side on one replica: accuracy, chunk rate, CPU.

On the paced replica (bench/paced_replica.py: TTFT and ITL fixed by a clock, one chunk per write,
every write noted) the run climbs a ladder of stream counts (`--streams`, default 64, 128, 256,
512) and, at each, runs `vllm bench serve` and then the probe for each `--workers` setting,
alternating over the rounds so drift hits all. Each run prints its TTFT and ITL percentiles' error
against the replica's truth over the same steady window (p50 and p99, in ms), its client CPU per
chunk, the probe's own client-bound verdict, and the machine's load average, since the cores are
shared. The summary gives the medians, the CPU ratio to `vllm bench serve`, and the most streams
each client held before its p99 ITL error passed 1 ms.

Other replicas (`--servers`) run one comparison at `--concurrency`: `firehose` (the paced replica
writing as fast as the client reads: the client's own sustainable chunk rate), `vllm` (the tiny
vLLM CPU replica the tests use), `sim`, or `url` (a running replica, with --model and --tokenizer).
A first part times the per-chunk client work (split, parse, timestamp) of both clients on the same
bytes. Run it alone on the machine, under the shared lock:

    .venv/bin/python -m bench.bench_probe --servers paced
    .venv/bin/python -m bench.bench_probe --servers vllm --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import httpx

from bench.probe_clients import (
    REPO,
    VLLM_PYTHON,
    Load,
    Score,
    run_probe,
    run_vllm_bench,
    score_window,
    take_truth,
)
from slotop.collectors.probe.stream import StreamMeter
from tests.support import vllm_replica as helpers

ITL_ERROR_BOUND_S = 0.001
"""The p99 ITL error a client may add before its numbers are called bent (the issue's bound)."""

_VLLM_CHUNK_COST = """
import json, sys, time
from vllm.benchmarks.lib.endpoint_request_func import StreamedResponseHandler
pieces = [piece + "\\n\\n" for piece in sys.stdin.read().split("\\n\\n") if piece]
pieces = [piece.encode() for piece in pieces]
handler = StreamedResponseHandler()
itl, text_out, last = [], "", time.perf_counter()
started = time.perf_counter()
for chunk_bytes in pieces:
    chunk_bytes = chunk_bytes.strip()
    if not chunk_bytes:
        continue
    for message in handler.add_chunk(chunk_bytes):
        if message.startswith(":"):
            continue
        chunk = message.removeprefix("data: ")
        if chunk != "[DONE]":
            data = json.loads(chunk)
            if choices := data.get("choices"):
                text = choices[0].get("text")
                timestamp = time.perf_counter()
                itl.append(timestamp - last)
                last = timestamp
                text_out += text or ""
print((time.perf_counter() - started) / len(pieces))
"""


def sample_stream(chunks: int) -> bytes:
    """A vLLM /v1/completions stream body of `chunks` token chunks, as the server writes it."""
    head = (
        '{"id":"cmpl-0123456789abcdef","object":"text_completion","created":1,"model":"tiny-llama",'
    )
    events = [
        f'data: {head}"choices":[{{"index":0,"text":" word{i}","logprobs":null,'
        '"finish_reason":null,"stop_reason":null}],"usage":null}\n\n'
        for i in range(chunks)
    ]
    return "".join(events).encode()


def per_chunk_cost_s(chunks: int = 20_000) -> tuple[float, float]:
    """Client work per chunk (split, parse, timestamp) for the probe and for `vllm bench serve`."""
    body = sample_stream(chunks)
    pieces = [piece + b"\n\n" for piece in body.split(b"\n\n") if piece]
    meter = StreamMeter(time.perf_counter())
    clock = time.perf_counter
    started = clock()
    for piece in pieces:
        meter.feed(piece, clock())
    probe_cost = (clock() - started) / len(pieces)
    done = subprocess.run(
        [str(VLLM_PYTHON), "-c", _VLLM_CHUNK_COST],
        input=body.decode(),
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return probe_cost, float(done.stdout.strip().splitlines()[-1])


def _wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    for _ in range(600):
        if process.poll() is not None:
            raise SystemExit(f"the replica at {url} exited with {process.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise SystemExit(f"the replica at {url} did not answer within 60 s")


@contextlib.contextmanager
def serve(server: str, args: argparse.Namespace, work: Path) -> Iterator[tuple[str, str, Path]]:
    """Yield (url, served model name, tokenizer dir) of one replica the run targets."""
    tokenizer = work / "tiny-llama"
    if not tokenizer.exists():
        helpers.build_tiny_model(tokenizer)
    if server == "url":
        yield args.url, args.model, Path(args.tokenizer) if args.tokenizer else tokenizer
        return
    if server == "vllm":
        flags = helpers.ReplicaFlags(max_num_seqs=max(args.concurrency, 8))
        with helpers.VllmReplica(tokenizer, work / "replica.log", flags) as replica:
            yield replica.url, helpers.SERVED_MODEL_NAME, tokenizer
        return
    port = helpers.free_port()
    if server == "sim":
        argv = [sys.executable, "-m", "slotop.sim", "--port", str(port), "--model", "qwen2.5-0.5b"]
        argv += ["--served-model-name", helpers.SERVED_MODEL_NAME]
    else:
        itl_ms = 0.0 if server == "firehose" else args.paced_itl_ms
        argv = [sys.executable, str(REPO / "bench" / "paced_replica.py"), "--port", str(port)]
        argv += ["--ttft-ms", str(args.paced_ttft_ms), "--itl-ms", str(itl_ms)]
        argv += ["--model", helpers.SERVED_MODEL_NAME, "--prompt-tokens", str(args.prompt_tokens)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process)
        yield url, helpers.SERVED_MODEL_NAME, tokenizer
    finally:
        process.terminate()
        process.wait(10)


def _ms(seconds: float, width: int = 9) -> str:
    return f"{seconds * 1000:{width}.3f}"


def _load_average() -> str:
    one, five, _ = os.getloadavg()
    return f"{one:4.1f}/{five:4.1f}"


def _workers_value(word: str) -> int | None:
    """A --workers word as the probe's setting: a number, or None for auto."""
    return None if word in ("auto", "default") else int(word)


def compare(server: str, args: argparse.Namespace, work: Path) -> None:
    """Alternate both clients on one replica for the rounds, and print each run and the medians."""
    load = Load(args.concurrency, args.prompt_tokens, args.output_tokens, args.requests)
    with serve(server, args, work) as (url, model, tokenizer):
        print(
            f"\n[{server}] {url}: concurrency {load.streams}, prompts {load.prompt_tokens}, "
            f"outputs {load.output_tokens} tokens, {load.requests} requests a run"
        )
        print(f"{'client':<8}{'round':>6}{'chunks/s':>10}{'TTFT p50':>10}{'p99 ms':>10}"
              f"{'ITL p50':>10}{'p99 ms':>10}{'scored':>8}{'cpu µs/chunk':>14}{'load avg':>11}")  # fmt: skip
        scores: dict[str, list[Score]] = {"vllm": [], "probe": []}
        for index in range(args.rounds):
            for name in ("vllm", "probe"):
                if name == "vllm":
                    result = run_vllm_bench(url, model, tokenizer, load, index, work)
                else:
                    result = run_probe(url, model, load, index)
                scores[name].append(result)
                print(
                    f"{name:<8}{index:>6}{result.chunks_per_s:>10.0f}{_ms(result.ttft_p50_s):>10}"
                    f"{_ms(result.ttft_p99_s):>10}{_ms(result.itl_p50_s):>10}"
                    f"{_ms(result.itl_p99_s):>10}{result.requests_scored:>8}"
                    f"{(result.cpu_per_chunk_s or 0) * 1e6:>14.2f}{_load_average():>11}"
                )

    def median(name: str, field: str) -> float:
        return statistics.median(getattr(s, field) for s in scores[name])

    ratio = median("probe", "chunks_per_s") / median("vllm", "chunks_per_s")
    cpu_ratio = median("probe", "cpu_per_chunk_s") / median("vllm", "cpu_per_chunk_s")
    print(f"  medians: chunks/s probe / vllm = {ratio:.3f}; client CPU per chunk probe / vllm = "
          f"{cpu_ratio:.3f}")  # fmt: skip
    for field in ("ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s"):
        probe_value, vllm_value = median("probe", field), median("vllm", field)
        diff = (probe_value - vllm_value) / vllm_value * 100
        print(
            f"  {field[:-2]:<9} probe {_ms(probe_value)} ms  vllm {_ms(vllm_value)} ms  "
            f"probe − vllm {diff:+7.2f}%"
        )


Errors = tuple[float, float, float, float]
"""A run's error against the truth: TTFT p50, TTFT p99, ITL p50, ITL p99, in seconds."""


def errors_of(result: Score, truth: Score) -> Errors:
    return (
        result.ttft_p50_s - truth.ttft_p50_s,
        result.ttft_p99_s - truth.ttft_p99_s,
        result.itl_p50_s - truth.itl_p50_s,
        result.itl_p99_s - truth.itl_p99_s,
    )


def ladder(args: argparse.Namespace, work: Path) -> None:
    """The paced replica at each stream count: every client's error against the truth, and CPU."""
    clients = [] if args.skip_vllm else ["vllm"]
    clients += [f"probe w={w}" for w in args.workers.split(",")]
    with serve("paced", args, work) as (url, model, tokenizer):
        print(
            f"\n[paced] {url}: TTFT {args.paced_ttft_ms:g} ms, ITL {args.paced_itl_ms:g} ms, "
            f"prompts {args.prompt_tokens}, outputs {args.output_tokens} tokens, "
            f"{args.requests_per_stream} requests a stream a run; errors are client − truth, "
            "load average 1/5 min (the cores are shared)"
        )
        print(f"{'streams':>7} {'client':<12}{'round':>5}{'chunks/s':>9}{'TTFT p50':>9}{'p99':>8}"
              f"{'ITL p50':>9}{'p99 ms':>8}{'cpu µs/ch':>10}{'reader':>7}{'bound':>6}"
              f"{'load avg':>10}  lag")  # fmt: skip
        runs: dict[tuple[int, str], list[tuple[Score, Errors]]] = {}
        for streams in (int(s) for s in args.streams.split(",")):
            load = Load(
                streams, args.prompt_tokens, args.output_tokens, streams * args.requests_per_stream
            )
            for index in range(args.rounds):
                for client in clients:
                    take_truth(url)  # forget what earlier runs were sent
                    if client == "vllm":
                        result = run_vllm_bench(url, model, tokenizer, load, index, work)
                    else:
                        workers = _workers_value(client.split("=", 1)[1])
                        result = run_probe(url, model, load, index, workers)
                    truth = score_window(take_truth(url), result.start_s, result.end_s)
                    errors = errors_of(result, truth)
                    runs.setdefault((streams, client), []).append((result, errors))
                    bound = {None: "-", True: "YES", False: "no"}[result.client_bound]
                    reader = result.reader_cpu_per_chunk_s
                    print(
                        f"{streams:>7} {client:<12}{index:>5}{result.chunks_per_s:>9.0f}"
                        f"{_ms(errors[0], 9)}{_ms(errors[1], 8)}{_ms(errors[2], 9)}"
                        f"{_ms(errors[3], 8)}{(result.cpu_per_chunk_s or 0) * 1e6:>10.2f}"
                        f"{(reader * 1e6 if reader is not None else 0):>7.2f}{bound:>6}"
                        f"{_load_average():>10}  {result.lag_words}",
                        flush=True,
                    )
    summarize(runs, clients)


def summarize(runs: dict[tuple[int, str], list[tuple[Score, Errors]]], clients: list[str]) -> None:
    """Medians per stream count and client, CPU against vllm's, and where the error passes 1 ms."""
    print("\nmedians over the rounds (ms; cpu in µs per chunk, and the ratio to vllm bench serve):")
    held: dict[str, int] = {}
    passed: dict[str, bool] = {}
    for streams in sorted({s for s, _ in runs}):
        vllm_runs = runs.get((streams, "vllm"), [])
        vllm_cpu = (
            statistics.median(r.cpu_per_chunk_s or 0.0 for r, _ in vllm_runs) if vllm_runs else 0.0
        )
        for client in clients:
            entries = runs.get((streams, client), [])
            if not entries:
                continue
            err = [statistics.median(e[i] for _, e in entries) for i in range(4)]
            cpu = statistics.median(r.cpu_per_chunk_s or 0.0 for r, _ in entries)
            flags = "".join({None: "-", True: "Y", False: "n"}[r.client_bound] for r, _ in entries)
            print(
                f"  {streams:>4} {client:<12} TTFT p50 {err[0] * 1e3:+7.3f} p99 {err[1] * 1e3:+8.3f}"
                f"  ITL p50 {err[2] * 1e3:+7.3f} p99 {err[3] * 1e3:+8.3f}  cpu {cpu * 1e6:6.2f}"
                f" ({cpu / vllm_cpu if vllm_cpu else float('nan'):.2f}×)  bound {flags}"
            )
            if err[3] <= ITL_ERROR_BOUND_S and not passed.get(client):
                held[client] = streams
            else:
                passed[client] = True
    print("most streams held before the p99 ITL error passed 1 ms:")
    for client in clients:
        print(f"  {client:<12} {held.get(client, 0)}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--servers",
        default="paced,firehose,vllm",
        help="comma list of paced, firehose, vllm, sim, url (default: %(default)s)",
    )
    parser.add_argument("--url", help="the replica for server 'url' (with --model, --tokenizer)")
    parser.add_argument("--model", default="tiny-llama")
    parser.add_argument("--tokenizer", help="tokenizer directory for vllm bench serve")
    parser.add_argument("--concurrency", type=int, default=8, help="streams off the paced ladder")
    parser.add_argument("--streams", default="64,128,256,512", help="the paced ladder's rungs")
    parser.add_argument(
        "--workers",
        default="1,2,auto",
        help="probe worker settings on the paced ladder: numbers, auto, or default (%(default)s)",
    )
    parser.add_argument("--requests-per-stream", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=64, help="requests a run off the ladder")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paced-ttft-ms", type=float, default=30.0)
    parser.add_argument("--paced-itl-ms", type=float, default=20.0)
    parser.add_argument("--skip-chunk-cost", action="store_true")
    parser.add_argument("--skip-vllm", action="store_true", help="the probe alone on the ladder")
    args = parser.parse_args(argv)

    print(f"load average at the start {_load_average()} on {os.cpu_count()} cores")
    if not args.skip_chunk_cost:
        probe_chunk_s, vllm_chunk_s = per_chunk_cost_s()
        print("client work per chunk (split + parse + timestamp), same bytes:")
        print(f"  probe            {probe_chunk_s * 1e6:7.2f} µs")
        print(f"  vllm bench serve {vllm_chunk_s * 1e6:7.2f} µs   probe / vllm = {probe_chunk_s / vllm_chunk_s:.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        for server in args.servers.split(","):
            if server.strip() == "paced":
                ladder(args, Path(tmp))
            else:
                compare(server.strip(), args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
