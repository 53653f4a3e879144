"""A/A: restarts that change nothing, and how often a before/after says a metric moved anyway.

A no-op restart (max_num_seqs 200 ↔ 256 with at most 16 in flight: the replica's timing does not
change) is made again and again at a steady load, through the two paths an operator meets:

- dashboard: the dashboard's own flow, `LiveBeforeAfter` fed by a real probe as the app feeds it,
  the restart applied by `apply_restart` as the app's worker does, one probe kept across runs;
- headless: `slotop restart --concurrency N --dwell S --json` as a subprocess, a probe each run.

Each run's rows are judged as the panel judges them; a 95% band promises at most 5% of runs
"beyond noise" on any one row. Then the power: changes with a known effect, made ten times,
and how often each is called (its primary row marked better) or read backwards.

    .venv/bin/python -m bench.bench_aa [--runs 10] [--paths dashboard,headless]
        [--shapes demo,fixed,varied] [--power 10] [--phases] [--vllm] [--vllm-starts 4]
        [--vllm-runs 3] [--json FILE]

--virtual N runs N A/A restarts per shape on the simulated engine in virtual time (a run takes a
second or two), through the dashboard's side rules, and judges each twice: with the errors as
they are now (batches of two request lifetimes, Student's t) and as they were (each request an
independent draw, rates over ten sub-windows, 1.96), so the two can be read side by side; and
with the probe's dither off, to show what the dither buys. With --virtual, the power's runs are
made in virtual time too (the same sides and verdicts, a run a second or two).

--phases also reaches the load's level four ways (started there, + from below, − from above,
resumed after a restart) and prints TTFT p50 and p99 for each, with standard errors from the
way's own batches, and each way's difference from "started there" judged as a before/after
judges one (agrees: within the band; differs: beyond it). --vllm runs, on the real vLLM CPU
replica (its virtual environment, as the tests find it), through the dashboard's flow: the
replica's start-to-start spread from --vllm-starts restarts on the same dials (as `slotop restart
--starts` measures it), then --vllm-runs no-op restarts judged with the sampling band alone and
with the spread added (and the phase check first, with --phases). Figures are printed as they come; the
machine's load average is printed beside them, since the simulated replica runs in real time.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from slotop.actions.replica.process import ManagedReplica
from slotop.actions.replica.spec import Dials, LaunchSpec
from slotop.actions.restart.apply import apply_restart, plan_restart
from slotop.actions.restart.compare import Change, Comparison, compare_runs, measured_levels
from slotop.actions.restart.live import LiveBeforeAfter
from slotop.actions.restart.starts import StartSpread, estimate_start_spread
from slotop.actions.restart.verify import replica_verifier
from slotop.collectors.errors import CollectorError
from slotop.collectors.oneshot import snapshot_of_replica
from slotop.collectors.probe.handle import Probe
from slotop.collectors.probe.loadshape import LengthDistribution, LoadShape
from slotop.collectors.probe.settle import settled_by, steady
from slotop.collectors.probe.stream import ProbeTarget
from slotop.collectors.reading import read_metrics_text
from slotop.collectors.replica import ReplicaClient
from slotop.collectors.snapshot import Snapshot, kv_cache_state
from slotop.config import LoadSettings, ReplicaSettings, RestartSettings, Settings
from tests.support.vllm_replica import free_port

ROWS = (
    "ttft_p50_s",
    "ttft_p99_s",
    "itl_p50_s",
    "itl_p99_s",
    "output_tokens_per_s",
    "request_rate_rps",
    "goodput_rps",
    "goodput_ratio",
    "preemptions",
)
SIM = (sys.executable, "-m", "slotop.sim", "--model", "llama-3.1-8b", "--gpu", "h100-sxm")


@dataclass(frozen=True, slots=True)
class Shape:
    """A load the A/A runs at: its lengths, its level, and the simulated replica's extra flags."""

    name: str
    prompt: LengthDistribution
    output: LengthDistribution
    concurrency: int
    sim_flags: tuple[str, ...] = ()

    def load(self) -> LoadShape:
        return LoadShape(prompt_lengths=self.prompt, output_lengths=self.output)

    def settings(self) -> LoadSettings:
        return LoadSettings(
            prompt_distribution=self.prompt.kind,
            prompt_tokens=self.prompt.mean_tokens,
            prompt_spread_tokens=self.prompt.spread_tokens,
            output_distribution=self.output.kind,
            output_tokens=self.output.mean_tokens,
            output_spread_tokens=self.output.spread_tokens,
        )


SHAPES = {
    "demo": Shape(
        "demo: 512/128 fixed, 5 in flight",
        LengthDistribution("fixed", 512),
        LengthDistribution("fixed", 128),
        5,
    ),
    "fixed": Shape(
        "fixed: 1024/64 fixed, 16 in flight",
        LengthDistribution("fixed", 1024),
        LengthDistribution("fixed", 64),
        16,
    ),
    "varied": Shape(
        "varied: lognormal 512±256 / 128±64, 8 in flight",
        LengthDistribution("lognormal", 512, 256),
        LengthDistribution("lognormal", 128, 64),
        8,
    ),
}


@dataclass(slots=True)
class Tally:
    """Verdicts per row over runs."""

    runs: int = 0
    beyond: Counter[str] = field(default_factory=Counter)
    judged: Counter[str] = field(default_factory=Counter)
    wrong: Counter[str] = field(default_factory=Counter)

    def add(self, rows: dict[str, str], expect: dict[str, str] | None = None) -> None:
        self.runs += 1
        for key, verdict in rows.items():
            if verdict in ("better", "worse", "within noise", "same"):
                self.judged[key] += 1
            if verdict in ("better", "worse"):
                if expect is None or key not in expect or verdict == expect[key]:
                    self.beyond[key] += 1
                else:
                    self.wrong[key] += 1


def _load_average() -> str:
    return " ".join(f"{v:.1f}" for v in os.getloadavg())


def _managed_sim(folder: Path, flags: tuple[str, ...]) -> ManagedReplica:
    port = free_port()
    spec = LaunchSpec(
        url=f"http://127.0.0.1:{port}",
        command=(*SIM, *flags, "--host", "127.0.0.1", "--port", str(port)),
        log_path=folder / f"sim-{port}.log",
        state_path=folder / f"sim-{port}.json",
        health_timeout_s=60.0,
        stop_grace_s=5.0,
        drain_timeout_s=60.0,
    )
    return ManagedReplica(spec)


def _snapshot(url: str) -> Snapshot | None:
    try:
        with ReplicaClient(url) as client:
            return snapshot_of_replica(
                client, interval_s=0.5, long_window_s=60.0, short_window_s=10.0
            )
    except CollectorError:
        return None


def _moved_words(comparison: Comparison) -> str:
    """The rows beyond noise, each with its before, after and band."""
    moved = [
        f"{row.key} {row.before:.5g} → {row.after:.5g} (±{row.noise.half_width:.3g})"
        if row.noise.half_width is not None and row.before is not None and row.after is not None
        else f"{row.key} {row.verdict.value if row.verdict else ''}"
        for row in comparison.rows
        if row.key in ROWS and row.verdict in (Change.BETTER, Change.WORSE)
    ]
    return "beyond noise: " + ("; ".join(moved) or "none")


def _verdicts(comparison: Comparison) -> dict[str, str]:
    return {
        row.key: row.verdict.value
        for row in comparison.rows
        if row.key in ROWS and row.verdict is not None
    }


class Dashboard:
    """The dashboard's before/after flow on one replica with one probe, run after run."""

    def __init__(self, replica: ManagedReplica, shape: Shape, settings: Settings) -> None:
        self.replica = replica
        self.settings = settings
        self.live = LiveBeforeAfter(settings)
        self.probe = Probe.start(ProbeTarget(base_url=replica.url), shape.load(), concurrency=2)
        self.seen = 0
        for level in range(3, shape.concurrency + 1):  # as the demo's operator reached it: +
            time.sleep(2.0)
            self.probe.set_concurrency(level)
        self.records: list[Any] = []

    def take(self) -> None:
        events, records = self.probe.events(), self.probe.drain_records()
        self.live.add(records, events[self.seen :], self.probe.status())
        self.records += records
        self.seen = len(events)

    def wait_steady(self, least_s: float) -> None:
        """Run until the current step settled and has spanned twelve lifetimes, and `least_s`."""
        began = time.time()
        while True:
            self.probe.wait_for_batch(1.0)
            self.take()
            events = [e for e in self.probe.events() if e.concurrency]
            since = events[-1].at_s if events else began
            settled = settled_by(self.records, since, time.time())
            mine = steady(self.records, settled)
            ends = [r.e2e_s for r in mine if r.ok and r.e2e_s]
            cycle = float(np.median(ends)) if ends else None
            long_enough = cycle is not None and time.time() - settled > 14 * cycle
            if long_enough and time.time() - began >= least_s:
                return

    def restart(self, after: Dials) -> Comparison | None:
        before = self.replica.dials
        assert before is not None
        with ReplicaClient(self.replica.url) as client:
            kv = kv_cache_state(read_metrics_text(client.metrics_text()))
        self.take()
        plan = plan_restart(
            before,
            after,
            url=self.replica.url,
            how="managed",
            kv=kv,
            last_downtime_s=self.replica.last_downtime_s,
            probe_status=self.probe.status(),
            drain_timeout_s=60.0,
            health_timeout_s=60.0,
            same_dials=after == before,
        )
        self.live.began(plan, time.time(), _snapshot(self.replica.url))
        result = apply_restart(
            plan, self.replica, replica_verifier(self.replica.url, api_key=None), probe=self.probe
        )
        if not result.applied:
            print(f"    restart not applied: {result.lines()}", flush=True)
            return None
        self.live.ended(result)
        deadline = time.time() + 600.0
        while time.time() < deadline:
            self.probe.wait_for_batch(1.0)
            self.take()
            state = self.live.state(_snapshot(self.replica.url))
            job = self.live.build()
            if job is not None:
                self.live.built(job())
                state = self.live.state(None)
            if state is not None and state.comparison is not None:
                return state.comparison
            if state is not None and state.stopped:
                return None
        return None

    def close(self) -> None:
        self.probe.stop()


def _toggle(dials: Dials) -> Dials:
    return Dials(dials.kv_cache_dtype, 256 if dials.max_num_seqs == 200 else 200)


def no_op_restarts(
    replica: ManagedReplica,
    shape: Shape,
    settings: Settings,
    runs: int,
    shown: tuple[str, ...] = (),
    spread: StartSpread | None = None,
) -> tuple[Tally, Tally]:
    """`runs` no-op restarts through the dashboard's flow, each once the load has run steady;
    the rows beyond noise of each, and the `shown` rows whatever their verdict; the second tally
    judges the same sides with the band widened by `spread` (empty without one)."""
    tally, held = Tally(), Tally()
    flow = Dashboard(replica, shape, settings)
    try:
        for run in range(runs):
            flow.wait_steady(least_s=5.0)
            assert replica.dials is not None
            comparison = flow.restart(_toggle(replica.dials))
            if comparison is None:
                continue
            tally.add(_verdicts(comparison))
            print(
                f"    run {run + 1}: {_moved_words(comparison)}  (load {_load_average()})",
                flush=True,
            )
            if spread is not None:
                widened = compare_runs(
                    comparison.before,
                    comparison.after,
                    slo_percentiles=(settings.slo.ttft_percentile, settings.slo.itl_percentile),
                    min_requests=settings.restart.min_requests,
                    start_spread=spread,
                )
                held.add(_verdicts(widened))
                print(f"      with the start spread: {_moved_words(widened)}", flush=True)
            for row in comparison.rows:
                if row.key in shown:
                    print(
                        f"      {row.key:20s} {row.before!s:>22} → {row.after!s:<22} "
                        f"±{row.noise.half_width}  {row.verdict.value if row.verdict else ''}"
                    )
    finally:
        flow.close()
    return tally, held


def aa_dashboard(shape: Shape, runs: int, folder: Path) -> Tally:
    replica = _managed_sim(folder, shape.sim_flags)
    replica.start(Dials("auto", 200))
    try:
        return no_op_restarts(
            replica, shape, Settings(replica=ReplicaSettings(url=replica.url)), runs
        )[0]
    finally:
        replica.stop()


def _config(folder: Path, replica_url: str, command: tuple[str, ...], shape: Shape) -> Path:
    load = shape.settings()
    path = folder / "slotop.toml"
    path.write_text(
        f'[replica]\nurl = "{replica_url}"\n'
        "[load]\n"
        f'prompt_distribution = "{load.prompt_distribution}"\nprompt_tokens = {load.prompt_tokens}\n'
        f"prompt_spread_tokens = {load.prompt_spread_tokens}\n"
        f'output_distribution = "{load.output_distribution}"\noutput_tokens = {load.output_tokens}\n'
        f"output_spread_tokens = {load.output_spread_tokens}\n"
        f"[launch]\ncommand = {json.dumps(list(command))}\n"
        "health_timeout_s = 60.0\nstop_grace_s = 5.0\ndrain_timeout_s = 60.0\n",
        encoding="utf-8",
    )
    return path


@contextlib.contextmanager
def _launched(folder: Path, shape: Shape, dials: Dials) -> Iterator[Path]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = _config(folder, url, (*SIM, *shape.sim_flags, "--port", str(port)), shape)
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state")}
    flags = [f"--kv-cache-dtype={dials.kv_cache_dtype}", f"--max-num-seqs={dials.max_num_seqs}"]
    _slotop(["launch", "--config", str(config), "--no-attach", "--no-record", *flags], env)
    try:
        yield config
    finally:
        _slotop(["launch", "--config", str(config), "--stop"], env)


def _slotop(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "slotop", *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def _headless_restart(
    config: Path, env: dict[str, str], after: Dials, concurrency: int | None, dwell_s: float
) -> dict[str, str] | None:
    args = [
        "restart", "--config", str(config), "--yes", "--no-record", "--no-quality-check",
        f"--kv-cache-dtype={after.kv_cache_dtype}", f"--max-num-seqs={after.max_num_seqs}",
    ]  # fmt: skip
    if concurrency is not None:
        args += ["--concurrency", str(concurrency), "--dwell", f"{dwell_s:g}", "--json"]
    done = _slotop(args, env)
    if concurrency is None:
        return None
    try:
        data = json.loads(done.stdout)
    except json.JSONDecodeError:
        print(f"    slotop restart said: {done.stdout[-400:]} {done.stderr[-400:]}", flush=True)
        return None
    return {
        row["key"]: row["verdict"]
        for row in data.get("rows") or ()
        if row["key"] in ROWS and row["verdict"] is not None
    } or None


def aa_headless(shape: Shape, runs: int, folder: Path, dwell_s: float) -> Tally:
    tally = Tally()
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state")}
    dials = Dials("auto", 200)
    with _launched(folder, shape, dials) as config:
        for run in range(runs):
            dials = _toggle(dials)
            verdicts = _headless_restart(config, env, dials, shape.concurrency, dwell_s)
            if verdicts is None:
                continue
            tally.add(verdicts)
            moved = [k for k, v in verdicts.items() if v in ("better", "worse")]
            print(
                f"    run {run + 1}: beyond noise: {', '.join(moved) or 'none'}"
                f"  (load {_load_average()})",
                flush=True,
            )
    return tally


@dataclass(frozen=True, slots=True)
class Effect:
    """A change with a known effect: from where, to where, at what load, and the rows it moves."""

    name: str
    shape: Shape
    before: Dials
    after: Dials
    expect: dict[str, str]


KV_BINDS = Shape(
    "1024/512 fixed, 6 in flight, 288 KV blocks at 16 bits (577 at fp8)",
    LengthDistribution("fixed", 1024),
    LengthDistribution("fixed", 512),
    6,
    ("--gpu-memory-utilization", "0.217", "--max-model-len", "2048"),
)
EFFECTS = (
    Effect(
        "max_num_seqs 4 → 16 at 16 in flight",
        Shape(
            "512/128 fixed", LengthDistribution("fixed", 512), LengthDistribution("fixed", 128), 16
        ),
        Dials("auto", 4),
        Dials("auto", 16),
        {"ttft_p50_s": "better", "request_rate_rps": "better"},
    ),
    Effect(
        "fp8 where the KV cache binds (preemptions at 16 bits)",
        KV_BINDS,
        Dials("auto", 64),
        Dials("fp8", 64),
        {"preemptions": "better", "output_tokens_per_s": "better"},
    ),
)


def power(effect: Effect, runs: int, folder: Path, dwell_s: float) -> tuple[Tally, int]:
    """The effect made `runs` times (and undone, unmeasured, after each); the tally and the
    runs that called it (an expected row marked as expected)."""
    tally = Tally()
    called_runs = 0
    env = {**os.environ, "XDG_STATE_HOME": str(folder / "state")}
    with _launched(folder, effect.shape, effect.before) as config:
        for run in range(runs):
            verdicts = _headless_restart(
                config, env, effect.after, effect.shape.concurrency, dwell_s
            )
            _headless_restart(config, env, effect.before, None, dwell_s)  # back, unmeasured
            if verdicts is None:
                continue
            tally.add(verdicts, effect.expect)
            called = [k for k in effect.expect if verdicts.get(k) == effect.expect[k]]
            called_runs += bool(called)
            print(
                f"    run {run + 1}: called by {', '.join(called) or 'none'}; "
                f"{ {k: verdicts.get(k) for k in effect.expect} }  (load {_load_average()})",
                flush=True,
            )
    return tally, called_runs


def _print_tally(title: str, tally: Tally, keys: tuple[str, ...] = ROWS) -> dict[str, Any]:
    print(f"  {title}: {tally.runs} runs", flush=True)
    out: dict[str, Any] = {"runs": tally.runs, "rows": {}}
    for key in keys:
        judged = tally.judged[key]
        share = tally.beyond[key] / judged if judged else None
        shown = f"{share:5.0%}" if share is not None else "  n/a"
        print(f"    {key:22s} beyond noise {tally.beyond[key]:3d}/{judged:<3d} {shown}")
        out["rows"][key] = {
            "beyond": tally.beyond[key],
            "judged": judged,
            "wrong": tally.wrong[key],
        }
    return out


def _phase_ways(concurrency: int) -> dict[str, Callable[[Probe], None]]:
    def ramp(probe: Probe) -> None:
        for level in range(3, concurrency + 1):
            time.sleep(2.0)
            probe.set_concurrency(level)

    def down(probe: Probe) -> None:
        time.sleep(6.0)
        probe.set_concurrency(concurrency)

    def resume(probe: Probe) -> None:
        ramp(probe)
        time.sleep(10.0)
        probe.set_concurrency(0)
        time.sleep(3.0)
        probe.set_concurrency(concurrency)

    return {"started at N": lambda _: None, "+ from 2": ramp, "- from N+3": down, "resumed": resume}


def phases(url: str, shape: Shape, span_s: float) -> dict[str, Any]:
    """TTFT p50 and p99 at one level reached four ways, each way judged against "started at N"
    as a before/after judges two sides: the difference against the noise of the two ways' own
    batches (`side_spread`), so the loop's correlation widens the band as it should."""
    from slotop.actions.restart.noise import (
        Noise,
        NoiseMethod,
        band_multiplier,
        difference_noise,
        side_spread,
    )

    out: dict[str, Any] = {}
    found: dict[str, tuple[list[float], Any]] = {}
    n = shape.concurrency
    for way, reach in _phase_ways(n).items():
        first = {"started at N": n, "- from N+3": n + 3}.get(way, 2)
        probe = Probe.start(ProbeTarget(base_url=url), shape.load(), concurrency=first)
        try:
            reach(probe)
            since = time.time()
            records: list[Any] = []
            while True:  # settle, then measure `span_s`
                probe.wait_for_batch(1.0)
                records += probe.drain_records()
                settled = settled_by(records, since, time.time())
                if settled > since and time.time() - settled > span_s:
                    break
                if settled == since and time.time() - since > span_s + 20.0:
                    break
            mine = [r for r in steady(records, settled) if r.ok and r.ttft_s is not None]
            ttft = [r.ttft_s for r in mine if r.ttft_s is not None]
            sent = [r.sent_at_s for r in mine]  # records come in the order they ended
            spread = side_spread(mine, min(sent), max(sent), (50.0, 99.0), None) if mine else None
            values = [float(np.percentile(ttft, p)) if ttft else float("nan") for p in (50, 99)]
            found[way] = (values, spread)
            row: dict[str, Any] = {"requests": len(ttft), "batches": spread and spread.batches}
            words = []
            for column, p in enumerate((50.0, 99.0)):
                se = spread.latency("ttft", p) if spread is not None else None
                row[f"p{p:g}"] = {"value_s": values[column], "se_s": se}
                verdict = ""
                if way != "started at N" and "started at N" in found:
                    base_values, base_spread = found["started at N"]
                    base_se = base_spread.latency("ttft", p) if base_spread else None
                    noise = difference_noise(
                        base_se,
                        se,
                        band_multiplier(
                            base_spread and base_spread.batches, spread and spread.batches
                        ),
                    )
                    delta = values[column] - base_values[column]
                    if any(x is None or x.is_thin("ttft", p) for x in (spread, base_spread)):
                        noise = None  # too few requests above it: the before/after's rule
                    beyond = Noise(NoiseMethod.BOOTSTRAP, half_width=noise).beyond(delta)
                    verdict = {None: "noise unknown", True: "differs", False: "agrees"}[beyond]
                    row[f"p{p:g}"] |= {"delta_s": delta, "noise_s": noise, "verdict": verdict}
                    verdict = f" {delta * 1e3:+.1f} ±{(noise or float('nan')) * 1e3:.1f} {verdict}"
                se_ms = f"±{se * 1e3:.1f}" if se is not None else "±?"
                words.append(f"p{p:g} {values[column] * 1e3:6.1f} ms ({se_ms} se){verdict}")
            out[way] = row
            print(
                f"    {way:13s} {len(ttft):4d} requests  TTFT "
                + "  ".join(words)
                + f"  (load {_load_average()})",
                flush=True,
            )
        finally:
            probe.stop()
    return out


def _vllm(folder: Path, runs: int, starts: int, with_phases: bool) -> dict[str, Any]:
    from tests.support.vllm_replica import build_tiny_model, managed_spec, vllm_python

    if vllm_python() is None:
        print("  no vLLM virtual environment: skipped", flush=True)
        return {}
    model = build_tiny_model(folder / "model")
    spec = managed_spec(model, folder / "vllm.log", folder / "vllm.json")
    replica = ManagedReplica(spec)
    replica.start(Dials("auto", 200))
    shape = Shape(
        "vLLM CPU, tiny Llama: 64/32 fixed, 4 in flight",
        LengthDistribution("fixed", 64),
        LengthDistribution("fixed", 32),
        4,
    )
    out: dict[str, Any] = {}
    try:
        if with_phases:
            print(f"  phases, {shape.name}", flush=True)
            out["phases"] = phases(replica.url, shape, span_s=30.0)
        settings = Settings(
            replica=ReplicaSettings(url=replica.url), restart=RestartSettings(min_requests=50)
        )
        spread = None
        if starts:
            print(f"  start-to-start spread: {starts} restarts on the same dials", flush=True)
            spread = start_spread(replica, shape, settings, starts)
            out["start_spread"] = spread.to_json() if spread is not None else None
        shown = ("ttft_p50_s", "itl_p50_s", "output_tokens_per_s")
        tally, held = no_op_restarts(replica, shape, settings, runs, shown, spread)
        out["aa"] = _print_tally("A/A on vLLM, dashboard flow, sampling band alone", tally)
        if spread is not None:
            out["aa_with_spread"] = _print_tally(
                "A/A on vLLM, dashboard flow, band with the start-to-start spread", held
            )
    finally:
        replica.stop()
    return out


def start_spread(
    replica: ManagedReplica, shape: Shape, settings: Settings, restarts: int
) -> StartSpread | None:
    """The replica's start-to-start spread as `slotop restart --starts` measures it, through
    the dashboard's sides: the running start's before side and each restart's after side."""
    percentiles = (settings.slo.ttft_percentile, settings.slo.itl_percentile)
    flow = Dashboard(replica, shape, settings)
    levels = []
    try:
        for run in range(restarts):
            flow.wait_steady(least_s=5.0)
            assert replica.dials is not None
            comparison = flow.restart(replica.dials)
            if comparison is None:
                return None
            if not levels:
                levels.append(measured_levels(comparison.before, percentiles))
            levels.append(measured_levels(comparison.after, percentiles))
            shown = {k: levels[-1][k][0] for k in ("ttft_p50_s", "itl_p50_s") if k in levels[-1]}
            tokens = levels[-1].get("output_tokens_per_s", (float("nan"), None))[0]
            print(
                f"    start {run + 2}: "
                + ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in shown.items())
                + f", output {tokens:.1f} tok/s  (load {_load_average()})",
                flush=True,
            )
    finally:
        flow.close()
    spread = estimate_start_spread(levels, concurrency=shape.concurrency)
    print(
        "    spread between starts (sd over mean, beyond sampling): "
        + ", ".join(f"{k} {v:.1%}" for k, v in spread.relative.items()),
        flush=True,
    )
    return spread


def _old_style_noise(
    before: list[Any], after: list[Any], spans: tuple[tuple[float, float], tuple[float, float]]
) -> dict[str, float | None]:
    """The half-widths the before/after gave before batches: every request an independent draw
    for percentiles, ten equal sub-windows for rates, 1.96 standard errors."""
    from slotop.actions.restart.noise import batch_means_se
    from slotop.collectors.probe.resample import cluster_percentile_se
    from slotop.collectors.probe.stats import tokens_in_window

    errors: dict[str, list[float | None]] = {}
    for side, (start, end) in zip((before, after), spans, strict=True):
        ok = [r for r in side if r.ok and start <= r.sent_at_s <= end]
        ttft = cluster_percentile_se([r.ttft_s for r in ok], range(len(ok)), (50.0, 99.0))
        itl = cluster_percentile_se(
            [g for r in ok for g in r.itl_s],
            [i for i, r in enumerate(ok) for _ in r.itl_s],
            (50.0, 99.0),
        )
        step = (end - start) / 10
        windows = [(start + i * step, start + (i + 1) * step) for i in range(10)]
        rates = [sum(1 for r in ok if a <= r.sent_at_s < b) / step for a, b in windows]
        tokens = [tokens_in_window(side, a, b) / step for a, b in windows]
        for key, value in (
            ("ttft_p50_s", ttft[0]),
            ("ttft_p99_s", ttft[1]),
            ("itl_p50_s", itl[0]),
            ("itl_p99_s", itl[1]),
            ("request_rate_rps", batch_means_se(rates)),
            ("output_tokens_per_s", batch_means_se(tokens)),
        ):
            errors.setdefault(key, []).append(value)
    return {
        key: 1.96 * float(np.hypot(*pair)) if None not in pair else None  # type: ignore[arg-type]
        for key, pair in errors.items()
    }


def _engine_kwargs(flags: tuple[str, ...]) -> dict[str, Any]:
    """`slotop sim` flags as `engine_config` keywords (`--max-model-len 2048`: max_model_len=2048)."""
    kwargs: dict[str, Any] = {}
    for flag, value in zip(flags[::2], flags[1::2], strict=True):
        kwargs[flag.removeprefix("--").replace("-", "_")] = (
            float(value) if "." in value else int(value)
        )
    return kwargs


Spans = tuple[tuple[float, float], tuple[float, float]]


@dataclass(frozen=True, slots=True)
class VirtualSides:
    """One virtual restart's records (all, and the after load's), its two sides and their spans."""

    records: list[Any]
    mine: list[Any]
    before: list[Any]
    after: list[Any]
    spans: Spans

    def comparison(self) -> Comparison:
        """The sides judged as the dashboard judges them."""
        from slotop.actions.restart.measure import measured_side

        settings = Settings()
        sides = (
            measured_side("before", Dials(), self.records, *self.spans[0], settings),
            measured_side("after", Dials(), self.mine, *self.spans[1], settings),
        )
        return compare_runs(*sides, slo_percentiles=(99.0, 99.0))


def _virtual_restart(
    shape: Shape, load: LoadShape, before: Dials, after: Dials, seed: int
) -> VirtualSides:
    """One restart in virtual time from `before`'s dials to `after`'s at the shape's load, reached
    from 2 with `+` every 2 s, its sides cut by the dashboard's rules."""
    from slotop.actions.restart.noise import SIDE_CYCLES, loop_cycle_s
    from tests.support.virtual_load import Restart, SetLoad, VirtualRun, engine_config

    def config(dials: Dials) -> Any:
        return engine_config(
            kv_cache_dtype=dials.kv_cache_dtype,
            max_num_seqs=dials.max_num_seqs,
            **_engine_kwargs(shape.sim_flags),
        )

    n = shape.concurrency
    ramp = [SetLoad(0.0, 2)] + [SetLoad(2.0 * i, c) for i, c in enumerate(range(3, n + 1), 1)]
    run = VirtualRun(config(before), load, seed=seed).run(
        [*ramp, Restart(60.0 + 2 * n, config(after))], 150.0 + 2 * n
    )
    pause = run.restarts[0][0]
    old_step, new_step = run.events[-3], run.events[-1]
    settled_old = settled_by(run.records, old_step.at_s, pause)
    before_side = sorted(
        steady(
            [r for r in run.records if r.step == old_step.step and r.sent_at_s < pause],
            settled_old,
        ),
        key=lambda r: r.sent_at_s,
    )
    cycle = loop_cycle_s(before_side) or 1.0
    before_side = [
        r for r in before_side if r.sent_at_s >= pause - SIDE_CYCLES * cycle
    ] or before_side[-50:]
    mine = [r for r in run.records if r.step == new_step.step]
    settled = settled_by(run.records, new_step.at_s, float("inf"))
    after_side = [
        r
        for r in sorted(steady(mine, settled), key=lambda r: r.sent_at_s)
        if r.sent_at_s <= settled + SIDE_CYCLES * cycle
    ]
    spans = ((before_side[0].sent_at_s, pause), (settled, after_side[-1].sent_at_s))
    return VirtualSides(run.records, mine, before_side, after_side, spans)


def virtual_aa(shape: Shape, runs: int, dither: bool) -> tuple[Tally, Tally]:
    """A/A restarts in virtual time: the dashboard's sides, judged now and the old way."""
    load = shape.load() if dither else dataclasses.replace(shape.load(), output_dither_ratio=0.0)
    now, old = Tally(), Tally()
    same = Dials("auto", 200)
    for seed in range(runs):
        sides = _virtual_restart(shape, load, same, same, seed)
        comparison = sides.comparison()
        now.add(_verdicts(comparison))
        widths = _old_style_noise(sides.before, sides.after, sides.spans)
        verdicts = {}
        for row in comparison.rows:
            width = widths.get(row.key)
            if row.key in widths and row.delta is not None and width is not None:
                verdicts[row.key] = "worse" if abs(row.delta) > width else "within noise"
        old.add(verdicts)
    return now, old


def virtual_power(effect: Effect, runs: int) -> tuple[Tally, int]:
    """The effect made `runs` times in virtual time, judged as the dashboard judges it: the tally
    and the runs that called it (an expected row marked as expected)."""
    tally = Tally()
    called_runs = 0
    for seed in range(runs):
        sides = _virtual_restart(
            effect.shape, effect.shape.load(), effect.before, effect.after, seed
        )
        verdicts = _verdicts(sides.comparison())
        tally.add(verdicts, effect.expect)
        called_runs += any(verdicts.get(k) == want for k, want in effect.expect.items())
    return tally, called_runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="A/A restarts per path and shape")
    parser.add_argument("--paths", default="dashboard,headless")
    parser.add_argument("--shapes", default="demo,fixed,varied")
    parser.add_argument("--power", type=int, default=10, help="runs per known effect (0: none)")
    parser.add_argument("--dwell", type=float, default=15.0, help="the headless path's --dwell")
    parser.add_argument("--phases", action="store_true")
    parser.add_argument("--virtual", type=int, default=0, metavar="N")
    parser.add_argument("--vllm", action="store_true")
    parser.add_argument(
        "--vllm-starts",
        type=int,
        default=4,
        metavar="N",
        help="with --vllm: restarts on the same dials that measure the start-to-start spread "
        "first (0: none), then the A/A restarts are judged with and without it",
    )
    parser.add_argument("--vllm-runs", type=int, default=3, help="with --vllm: A/A restarts")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {"started": time.time()}
    with tempfile.TemporaryDirectory(prefix="slotop-aa-") as tmp:
        folder = Path(tmp)
        shapes = [SHAPES[name] for name in args.shapes.split(",") if name]
        for shape in shapes if args.virtual else ():
            for dither in (True, False):
                label = f"virtual A/A, {shape.name}, dither {'on' if dither else 'off'}"
                print(label, flush=True)
                now, old = virtual_aa(shape, args.virtual, dither)
                results.setdefault("virtual", {})[label] = {
                    "now": _print_tally("errors from batches, Student's t (now)", now),
                    "old": _print_tally(
                        "errors as if every request were independent, 1.96 (before)",
                        old,
                        keys=tuple(k for k in ROWS if k in old.judged),
                    ),
                }
        if args.phases:
            for shape in shapes:
                print(f"phases on the simulated H100, {shape.name}", flush=True)
                replica = _managed_sim(folder, shape.sim_flags)
                replica.start(Dials("auto", 200))
                try:
                    results.setdefault("phases", {})[shape.name] = phases(replica.url, shape, 30.0)
                finally:
                    replica.stop()
        for path in [p for p in args.paths.split(",") if p]:
            for shape in shapes:
                print(f"A/A, {path} path, {shape.name}", flush=True)
                tally = (
                    aa_dashboard(shape, args.runs, folder)
                    if path == "dashboard"
                    else aa_headless(shape, args.runs, folder, args.dwell)
                )
                results.setdefault("aa", {}).setdefault(path, {})[shape.name] = _print_tally(
                    f"{path}, {shape.name}", tally
                )
        for effect in EFFECTS if args.power else ():
            where = "virtual time" if args.virtual else "the simulated replica"
            print(f"power: {effect.name} ({effect.shape.name}), in {where}", flush=True)
            tally, called = (
                virtual_power(effect, args.power)
                if args.virtual
                else power(effect, args.power, folder, args.dwell)
            )
            wrong = sum(tally.wrong.values())
            print(
                f"  {effect.name}: called in {called} of {tally.runs} runs "
                f"({', '.join(f'{k} {tally.beyond[k]}' for k in effect.expect)}); "
                f"read backwards {wrong} times",
                flush=True,
            )
            results.setdefault("power", {})[effect.name] = {
                "runs": tally.runs,
                "called": called,
                "wrong": wrong,
                "rows": {k: tally.beyond[k] for k in effect.expect},
            }
        if args.vllm:
            print("the real vLLM CPU replica", flush=True)
            results["vllm"] = _vllm(folder, args.vllm_runs, args.vllm_starts, args.phases)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
