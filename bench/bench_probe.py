"""The probe against `vllm bench serve`, side by side on one replica: chunk rate and percentiles.

Each round runs `vllm bench serve` (from the vLLM virtual environment, random dataset, the same
lengths, `--max-concurrency` equal to the probe's) and then the probe in closed loop at that
concurrency, alternating so drift hits both. Both are scored the same way from their own
per-request timings: token chunks per second inside the steady window (from 10% into the run to
the last send, when both hold the full concurrency), and TTFT / ITL p50 / p99 over the requests
that lived wholly inside that window. A second part times the per-chunk client work (split,
parse, timestamp) of both clients on the same bytes.

Replicas (`--servers`, in order): `paced` (bench/paced_replica.py: TTFT and ITL fixed by a clock,
so any difference is the clients'), `firehose` (the same, writing as fast as the client reads: the
client's own sustainable chunk rate), `vllm` (the tiny vLLM CPU replica the tests use), `sim`,
or `url` (a running replica, with --model and --tokenizer).

    .venv/bin/python bench/bench_probe.py
    .venv/bin/python bench/bench_probe.py --servers vllm --rounds 5
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np

from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.records import ProbeRecord
from slotop.collectors.probe.stream import ProbeTarget, StreamMeter
from tests.support import vllm_replica as helpers

REPO = Path(__file__).resolve().parent.parent
VLLM_PYTHON = Path(os.environ.get("SLOTOP_VLLM_PYTHON") or REPO / ".venv-vllm" / "bin" / "python")
WARMUP_FRACTION = 0.1

_VLLM_BENCH = """
import os, sys, time
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.benchmarks import serve
inner = serve.benchmark
async def timed_benchmark(*args, **kwargs):
    started = time.process_time()
    try:
        return await inner(*args, **kwargs)
    finally:
        with open(os.environ["BENCH_PROBE_CPU_FILE"], "w") as out:
            out.write(str(time.process_time() - started))
serve.benchmark = timed_benchmark
parser = FlexibleArgumentParser(prog="vllm bench serve")
serve.add_cli_args(parser)
serve.main(parser.parse_args(sys.argv[1:]))
"""

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


@dataclass(frozen=True, slots=True)
class Timed:
    """One request as either client saw it: send time, TTFT, gaps, and whether it succeeded."""

    sent_s: float
    ttft_s: float | None
    gaps_s: tuple[float, ...]
    ok: bool

    def chunk_times(self) -> np.ndarray:
        if self.ttft_s is None:
            return np.empty(0)
        return self.sent_s + self.ttft_s + np.concatenate(([0.0], np.cumsum(self.gaps_s)))


@dataclass(frozen=True, slots=True)
class Score:
    """One client's run, scored in the steady window."""

    chunks_per_s: float
    ttft_p50_s: float
    ttft_p99_s: float
    itl_p50_s: float
    itl_p99_s: float
    requests_scored: int
    cpu_per_chunk_s: float | None = None


def score(requests: Sequence[Timed], last_send_s: float) -> Score:
    """Chunk rate in the steady window, and percentiles over requests wholly inside it."""
    first_send = min(r.sent_s for r in requests)
    start = first_send + WARMUP_FRACTION * (last_send_s - first_send)
    times = np.concatenate([r.chunk_times() for r in requests])
    in_window = int(np.count_nonzero((times >= start) & (times <= last_send_s)))
    inside = [
        r
        for r in requests
        if r.ok
        and r.sent_s >= start
        and r.chunk_times().size
        and r.chunk_times()[-1] <= last_send_s
    ]
    ttfts = [r.ttft_s for r in inside if r.ttft_s is not None]
    itls = [gap for r in inside for gap in r.gaps_s]
    return Score(
        chunks_per_s=in_window / (last_send_s - start),
        ttft_p50_s=float(np.percentile(ttfts, 50)),
        ttft_p99_s=float(np.percentile(ttfts, 99)),
        itl_p50_s=float(np.percentile(itls, 50)),
        itl_p99_s=float(np.percentile(itls, 99)),
        requests_scored=len(inside),
    )


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a live process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_vllm_bench(
    url: str, model: str, tokenizer: Path, args: argparse.Namespace, seed: int, out_dir: Path
) -> Score:
    """Run `vllm bench serve` once and score its detailed per-request results."""
    result = out_dir / f"vllm-bench-{seed}.json"
    argv = [
        str(VLLM_PYTHON), "-c", _VLLM_BENCH,
        "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", model, "--tokenizer", str(tokenizer),
        "--dataset-name", "random",
        "--random-input-len", str(args.prompt_tokens),
        "--random-output-len", str(args.output_tokens),
        "--num-prompts", str(args.requests), "--max-concurrency", str(args.concurrency),
        "--request-rate", "inf", "--ignore-eos", "--seed", str(seed), "--num-warmups", "0",
        "--disable-tqdm", "--save-result", "--save-detailed",
        "--result-dir", str(out_dir), "--result-filename", result.name,
    ]  # fmt: skip
    cpu_file = out_dir / f"vllm-bench-{seed}.cpu"
    env = {**os.environ, "BENCH_PROBE_CPU_FILE": str(cpu_file)}
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800, env=env)
    if done.returncode != 0 or not result.exists():
        raise SystemExit(f"vllm bench serve failed ({done.returncode}):\n{done.stderr[-3000:]}")
    data = json.loads(result.read_text(encoding="utf-8"))
    requests = [
        Timed(start, ttft if not error else None, tuple(itl), not error)
        for start, ttft, itl, error in zip(
            data["start_times"], data["ttfts"], data["itls"], data["errors"], strict=True
        )
    ]
    chunks = sum(r.chunk_times().size for r in requests)
    scored = score(requests, max(r.sent_s for r in requests))
    return dataclasses.replace(scored, cpu_per_chunk_s=float(cpu_file.read_text()) / chunks)


def run_probe(url: str, model: str, args: argparse.Namespace, seed: int) -> Score:
    """Run the probe at the same concurrency until the first `requests` have ended, and score it."""
    shape = LoadShape(
        prompt_lengths=LengthDistribution("fixed", args.prompt_tokens),
        output_lengths=LengthDistribution("fixed", args.output_tokens),
        max_concurrency=args.concurrency,
        seed=seed,
    )
    records: list[ProbeRecord] = []
    with Probe.start(ProbeTarget(url, model=model), shape, concurrency=args.concurrency) as probe:
        while probe.status() is None:  # started: imports and spawn are behind it
            probe.wait_for_batch(1.0)
        assert probe.pid is not None
        cpu_start = _cpu_s(probe.pid)
        while sum(1 for r in records if r.request_id < args.requests) < args.requests:
            probe.wait_for_batch(1.0)
            records.extend(probe.drain_records())
            if not probe.running:
                raise SystemExit(f"the probe stopped early: {probe.events()[-1]}")
        cpu_used = _cpu_s(probe.pid) - cpu_start
    records.extend(probe.drain_records())
    failed = [r for r in records if r.request_id < args.requests and not r.ok]
    if failed:
        raise SystemExit(f"{len(failed)} probe requests failed, first: {failed[0]}")
    requests = [Timed(r.sent_at_s, r.ttft_s, r.itl_s, r.ok) for r in records]
    last_send = max(r.sent_at_s for r in records if r.request_id < args.requests)
    chunks = sum(r.chunk_count for r in records)
    return dataclasses.replace(score(requests, last_send), cpu_per_chunk_s=cpu_used / chunks)


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
        argv += ["--model", helpers.SERVED_MODEL_NAME]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process)
        yield url, helpers.SERVED_MODEL_NAME, tokenizer
    finally:
        process.terminate()
        process.wait(10)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:9.3f}"


def compare(server: str, args: argparse.Namespace, work: Path) -> None:
    """Alternate both clients on one replica for the rounds, and print each run and the medians."""
    with serve(server, args, work) as (url, model, tokenizer):
        print(
            f"\n[{server}] {url}: concurrency {args.concurrency}, prompts {args.prompt_tokens}, "
            f"outputs {args.output_tokens} tokens, {args.requests} requests a run"
        )
        print(f"{'client':<8}{'round':>6}{'chunks/s':>10}{'TTFT p50':>10}{'p99 ms':>10}"
              f"{'ITL p50':>10}{'p99 ms':>10}{'scored':>8}{'cpu µs/chunk':>14}")  # fmt: skip
        scores: dict[str, list[Score]] = {"vllm": [], "probe": []}
        for index in range(args.rounds):
            for name in ("vllm", "probe"):
                if name == "vllm":
                    result = run_vllm_bench(url, model, tokenizer, args, index, work)
                else:
                    result = run_probe(url, model, args, index)
                scores[name].append(result)
                print(
                    f"{name:<8}{index:>6}{result.chunks_per_s:>10.0f}{_ms(result.ttft_p50_s):>10}"
                    f"{_ms(result.ttft_p99_s):>10}{_ms(result.itl_p50_s):>10}"
                    f"{_ms(result.itl_p99_s):>10}{result.requests_scored:>8}"
                    f"{(result.cpu_per_chunk_s or 0) * 1e6:>14.2f}"
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
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=128)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paced-ttft-ms", type=float, default=30.0)
    parser.add_argument("--paced-itl-ms", type=float, default=5.0)
    args = parser.parse_args(argv)

    probe_chunk_s, vllm_chunk_s = per_chunk_cost_s()
    print("client work per chunk (split + parse + timestamp), same bytes:")
    print(f"  probe            {probe_chunk_s * 1e6:7.2f} µs")
    print(f"  vllm bench serve {vllm_chunk_s * 1e6:7.2f} µs   probe / vllm = {probe_chunk_s / vllm_chunk_s:.2f}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-probe-") as tmp:
        for server in args.servers.split(","):
            compare(server.strip(), args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
