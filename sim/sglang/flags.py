"""`slotop sim --engine sglang`: the simulated replica with `sglang.launch_server`'s flag names.

Flags SGLang also has mean the same here and refuse what its argparse refuses (a `--kv-cache-dtype`
outside its choices exits 2); unset ones take SGLang 0.5.23's default for the simulated GPU. The
sim's own flags (`--gpu`, `--host-cpu`, `--seed`, the output lengths, `--dry-run`) are the vLLM
mode's; `--model` is SGLang's alias of `--model-path`, which takes a table model or a config.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence

from slotop.sim.cli import (
    DEFAULT_GPU,
    DEFAULT_MODEL,
    EXIT_FAILURE,
    EXIT_OK,
    add_behaviour_flags,
)
from slotop.sim.defaults import SEED
from slotop.sim.errors import SimConfigError, SimError
from slotop.sim.sglang.config import SglangArgs, SglangReplica, resolve
from slotop.sim.sglang.defaults import DEFAULT_HOST, DEFAULT_PORT, MAX_PREFILL_TOKENS
from slotop.sim.sglang.report import dry_run_report, dry_run_text
from slotop.sim.tables import GPUS, HOSTS, MODELS, host_by_name, model_by_name_or_path
from slotop.sim.types import SGLANG_KV_CACHE_DTYPE_BITS, OutputLengths, ServeOptions

_DESCRIPTION = """\
A simulated SGLang 0.5.23 replica: one model on one GPU (or a tensor-parallel group), serving
SGLang's OpenAI API, /health, /get_server_info and (with --enable-metrics) its /metrics, with
latencies and KV-cache occupancy from the sim's engine model and a calibrated roofline of the GPU.
No GPU needed. Flags that `python -m sglang.launch_server` also has mean the same thing here;
unset ones take SGLang's default for the chosen GPU.
"""

_EPILOG = f"""\
GPUs: {", ".join(GPUS)}
models: {", ".join(MODELS)} (or a Hugging Face config.json path)

examples:
  slotop sim --engine sglang --enable-metrics            H100 + Llama-3.1-8B on 127.0.0.1:30000
  slotop sim --engine sglang --dry-run                   print SGLang's KV-pool sizing and exit
  slotop sim --engine sglang --kv-cache-dtype fp8_e4m3 --dry-run   fp8 holds twice the tokens
"""

_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(value: str) -> int:
    """An integer as SGLang takes one: '2048', SI suffixes ('32k', '1.5M') or IEC ('32Ki')."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match is None:
        try:
            return int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer: {value!r}") from None
    number, suffix = match.groups()
    if suffix in _IEC:
        if "." in number:
            raise argparse.ArgumentTypeError(
                f"Decimals are not allowed with IEC suffixes like '{suffix}'."
            )
        return int(number) * _IEC[suffix]
    return int(float(number) * _SI[suffix])


def build_parser() -> argparse.ArgumentParser:
    """The parser of `slotop sim --engine sglang`: SGLang's flag names, plus the sim's own."""
    parser = argparse.ArgumentParser(
        prog="slotop sim --engine sglang",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serving = parser.add_argument_group("serving (as sglang.launch_server)")
    serving.add_argument(
        "--model-path",
        "--model",
        dest="model_path",
        help=f"table model ({', '.join(MODELS)}) or path to a config.json (default {DEFAULT_MODEL})",
    )
    serving.add_argument(
        "--served-model-name",
        help="the model name /v1/models and /metrics report (default: the model path)",
    )
    serving.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    serving.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}")
    serving.add_argument(
        "--api-key",
        help="require `Authorization: Bearer KEY` on every endpoint but /health*, /ready*, "
        "/metrics* (as SGLang does; default none)",
    )
    serving.add_argument(
        "--enable-metrics",
        action="store_true",
        help="serve SGLang's Prometheus families at /metrics (without it /metrics is a 404)",
    )
    serving.add_argument(
        "--tp-size",
        "--tensor-parallel-size",
        dest="tp_size",
        type=int,
        default=1,
        help="GPUs the model is split across (default 1)",
    )

    engine = parser.add_argument_group("memory and scheduling (as sglang.launch_server)")
    engine.add_argument(
        "--kv-cache-dtype",
        choices=list(SGLANG_KV_CACHE_DTYPE_BITS),
        default="auto",
        help="KV-cache element type: auto/bf16/bfloat16 take 2 bytes, fp8_e5m2/fp8_e4m3 1 byte "
        "(twice the tokens, half the bytes read per decode step), mxfp8 1 byte plus a scale per "
        "32, nvfp4/fp4_mx_block16 half a byte plus a scale per 16 (default auto)",
    )
    engine.add_argument(
        "--mem-fraction-static",
        type=float,
        help="share of GPU memory for weights and KV pool; the pool gets what the weights leave "
        "(default: SGLang's for the GPU, from the chunked prefill size and CUDA-graph sizes)",
    )
    engine.add_argument(
        "--max-running-requests",
        type=int,
        help="most requests running at once (default: SGLang's estimate from the pool, "
        "2048-4096, never above half its tokens)",
    )
    engine.add_argument(
        "--max-total-tokens",
        type=int,
        help="cap on the KV pool's tokens (default: what --mem-fraction-static leaves)",
    )
    engine.add_argument(
        "--chunked-prefill-size",
        type=int,
        help="most prompt tokens a prefill batch takes, so a long prompt is split and stalls "
        "running decodes less; -1 turns chunking off (default: SGLang's for the GPU: 2048 "
        "under 20 GiB, 4096 under 60 GiB, 8192 under 160 GiB, 16384 above)",
    )
    engine.add_argument(
        "--max-prefill-tokens",
        type=human_readable_int,
        default=MAX_PREFILL_TOKENS,
        help=f"most tokens of a prefill batch without chunking (default {MAX_PREFILL_TOKENS})",
    )
    engine.add_argument(
        "--page-size",
        type=int,
        help="tokens per KV page; a request holds ceil(tokens / page_size) pages (default 1)",
    )
    engine.add_argument(
        "--context-length",
        type=human_readable_int,
        help="longest prompt + output (e.g. 8192, 32k, 32Ki; default: the model's "
        "max_position_embeddings)",
    )
    engine.add_argument(
        "--disable-radix-cache",
        action="store_true",
        help="turn off reuse of cached prompt prefixes (the radix cache; on by default)",
    )
    engine.add_argument(
        "--disable-overlap-schedule",
        action="store_true",
        help="schedule each batch only after the last one ran (the overlap scheduler is on by "
        "default)",
    )
    engine.add_argument(
        "--random-seed",
        "--seed",
        dest="random_seed",
        type=int,
        default=SEED,
        help=f"seed; the sim draws output lengths from it (default {SEED})",
    )

    sim = parser.add_argument_group("simulation")
    sim.add_argument(
        "--engine", choices=["vllm", "sglang"], default="sglang", help="the API the sim speaks"
    )
    sim.add_argument(
        "--gpu", default=DEFAULT_GPU, choices=list(GPUS), help=f"default {DEFAULT_GPU}"
    )
    sim.add_argument(
        "--host-cpu",
        choices=list(HOSTS),
        help="the machine around the GPU (default: the GPU's usual one)",
    )
    add_behaviour_flags(sim)
    sim.add_argument(
        "--dry-run", action="store_true", help="print SGLang's KV-pool sizing lines, and exit"
    )
    sim.add_argument("--json", action="store_true", help="with --dry-run: print JSON")
    return parser


_SIM_ONLY = frozenset(
    {
        "engine",
        "gpu",
        "host_cpu",
        "output_len_distribution",
        "output_len_median",
        "output_len_sigma",
        "lag_log_threshold_ms",
        "dry_run",
        "json",
    }
)


def _launch_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> str:
    """The SGLang flags given, as `--name=value` words (what SGLang reports as its launch command)."""
    words = []
    for name, value in vars(args).items():
        if name in _SIM_ONLY or value == parser.get_default(name):
            continue
        flag = "--" + name.replace("_", "-")
        words.append(flag if value is True else f"{flag}={value}")
    return " ".join(words)


def replica_from_args(args: argparse.Namespace, launch_command: str = "") -> SglangReplica:
    """Resolve parsed flags as SGLang would on the simulated GPU (SimConfigError if it refuses)."""
    model_name = args.model_path or DEFAULT_MODEL
    model = model_by_name_or_path(model_name)
    model_path = model.name if model_name.lower() in MODELS else model_name
    given = SglangArgs(
        model_path=model_path,
        served_model_name=args.served_model_name,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        tp_size=args.tp_size,
        kv_cache_dtype=args.kv_cache_dtype,
        page_size=args.page_size,
        chunked_prefill_size=args.chunked_prefill_size,
        max_prefill_tokens=args.max_prefill_tokens,
        max_running_requests=args.max_running_requests,
        max_total_tokens=args.max_total_tokens,
        mem_fraction_static=args.mem_fraction_static,
        context_length=args.context_length,
        enable_metrics=args.enable_metrics,
        disable_radix_cache=args.disable_radix_cache,
        disable_overlap_schedule=args.disable_overlap_schedule,
        random_seed=args.random_seed,
        launch_command=launch_command,
    )
    return resolve(
        given,
        model,
        GPUS[args.gpu],
        output_lengths=OutputLengths(
            kind=args.output_len_distribution,
            median_tokens=args.output_len_median,
            sigma=args.output_len_sigma,
        ),
        host=host_by_name(args.host_cpu) if args.host_cpu else None,
    )


def main(argv: Sequence[str]) -> int:
    """Run `slotop sim --engine sglang` with `argv` and return the exit code."""
    parser = build_parser()
    args = parser.parse_args(list(argv))
    if args.json and not args.dry_run:
        parser.error("--json only goes with --dry-run")
    try:
        replica = replica_from_args(args, _launch_command(parser, args))
    except SimConfigError as exc:
        print(f"slotop sim: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.dry_run:
        if args.json:
            sys.stdout.write(json.dumps(dry_run_report(replica), indent=2) + "\n")
        else:
            sys.stdout.write(dry_run_text(replica))
        return EXIT_OK
    options = ServeOptions(
        host=args.host,
        port=args.port,
        served_model_names=(replica.served_model_name,),
        api_key=args.api_key,
        lag_log_threshold_s=args.lag_log_threshold_ms / 1e3,
    )
    try:
        from slotop.sim.sglang.server import serve

        return serve(replica, options)
    except SimError as exc:
        print(f"slotop sim: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
