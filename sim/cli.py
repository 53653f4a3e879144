"""`slotop sim`: start the simulated vLLM replica, with `vllm serve`'s flag names, or size it with --dry-run.

`--engine sglang` hands the arguments to `slotop.sim.sglang.flags` (SGLang's flag names) instead.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict

from slotop.sim.capacity import kv_capacity
from slotop.sim.defaults import (
    AUTO_MAX_MODEL_LEN,
    BLOCK_SIZE,
    CHAT_OUTPUT_LENGTHS,
    GPU_MEMORY_UTILIZATION,
    SEED,
    TENSOR_PARALLEL_SIZE,
    resolve_engine_config,
    vllm_batch_defaults,
)
from slotop.sim.errors import SimConfigError, SimError
from slotop.sim.tables import GPUS, HOSTS, MODELS, host_by_name, model_by_name_or_path
from slotop.sim.types import (
    KV_CACHE_DTYPE_BYTES,
    EngineConfig,
    KvCapacity,
    ModelSpec,
    OutputLengths,
    ServeOptions,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

DEFAULT_GPU = "h100-sxm"
DEFAULT_MODEL = "llama-3.1-8b"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_LAG_LOG_THRESHOLD_MS = 2.0
ENGINES = ("vllm", "sglang")
"""The servers the sim can speak as; `--engine` picks one (vLLM by default)."""

_GIB = 1 << 30

_DESCRIPTION = """\
A simulated vLLM replica: one model on one GPU (or a tensor-parallel group), serving vLLM's
OpenAI API and /metrics, with latencies and KV-cache occupancy from a model of vLLM's V1
scheduler (continuous batching, chunked prefill, paged KV blocks, preemption by recompute) and
a calibrated roofline of the GPU. No GPU needed. Flags that `vllm serve` also has mean the same
thing here; unset ones take vLLM's default for the chosen GPU. With `--engine sglang` it speaks
SGLang 0.5.23 instead, with `sglang.launch_server`'s flags (`slotop sim --engine sglang --help`).
"""

_EPILOG = f"""\
GPUs: {", ".join(GPUS)}
models: {", ".join(MODELS)} (or a Hugging Face config.json path)

examples:
  slotop sim                                   H100 + Llama-3.1-8B on 127.0.0.1:8000
  slotop sim --dry-run                         print the KV-cache sizing and exit
  slotop sim --kv-cache-dtype fp8 --dry-run    fp8 halves the bytes per token: twice the tokens
  slotop sim --model llama-3.1-70b --tensor-parallel-size 4 --max-model-len 32768
"""


def _human_int_or_auto(value: str) -> int:
    """A human-readable integer, or -1 for 'auto' / '-1' (fit to the KV cache)."""
    if value.strip().lower() in ("auto", "-1"):
        return AUTO_MAX_MODEL_LEN
    return _human_int(value)


def _human_int(value: str) -> int:
    """Integers as vLLM takes them: '2048', '32k' (×1000) or '32K' (×1024)."""
    value = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG])", value)
    if match is None:
        try:
            return int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer: {value!r}") from None
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9}[suffix])
    if "." in number:
        raise argparse.ArgumentTypeError(
            f"decimals are not allowed with binary suffixes like {suffix}; "
            f"did you mean {number}{suffix.lower()}?"
        )
    return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30}[suffix]


def build_parser() -> argparse.ArgumentParser:
    """The `slotop sim` parser: vLLM's flag names, plus the sim's own."""
    parser = argparse.ArgumentParser(
        prog="slotop sim",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model_tag",
        nargs="?",
        metavar="MODEL",
        help="the model to serve, as `vllm serve MODEL` takes it (same as --model)",
    )
    serving = parser.add_argument_group("serving (as vllm serve)")
    serving.add_argument(
        "--host", default=DEFAULT_HOST, help=f"address to bind (default {DEFAULT_HOST})"
    )
    serving.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port to bind (default {DEFAULT_PORT})"
    )
    serving.add_argument(
        "--served-model-name",
        nargs="+",
        metavar="NAME",
        help="model name(s) the API answers to and /metrics labels with "
        "(default: the model's Hugging Face id)",
    )
    serving.add_argument(
        "--api-key",
        help="require `Authorization: Bearer KEY` on /v1 requests (default: $VLLM_API_KEY, else none)",
    )

    engine = parser.add_argument_group("engine (as vllm serve)")
    engine.add_argument(
        "--model",
        dest="model",
        help=f"table model ({', '.join(MODELS)}) or path to a config.json (default {DEFAULT_MODEL})",
    )
    engine.add_argument(
        "--tensor-parallel-size",
        "-tp",
        type=int,
        default=TENSOR_PARALLEL_SIZE,
        help="GPUs the model is split across: weights and KV heads per GPU shrink, each layer "
        "adds two all-reduces (default 1)",
    )
    engine.add_argument(
        "--kv-cache-dtype",
        choices=list(KV_CACHE_DTYPE_BYTES),
        default="auto",
        help="KV-cache element type: auto/bfloat16/float16 take 2 bytes, fp8 variants 1 byte, "
        "so fp8 holds twice the tokens and reads half the bytes per decode step (default auto)",
    )
    engine.add_argument(
        "--block-size",
        type=int,
        default=BLOCK_SIZE,
        help="tokens per paged KV block; a sequence holds ceil(tokens / block_size) blocks "
        f"(default {BLOCK_SIZE})",
    )
    engine.add_argument(
        "--max-num-seqs",
        type=_human_int,
        help="most sequences running at once (batch size cap); default is vLLM's for the GPU: "
        "1024 on H100/H200, 256 on A100/L4/L40S",
    )
    engine.add_argument(
        "--max-num-batched-tokens",
        type=_human_int,
        help="token budget of one step; decodes take one token each, prefills are chunked into "
        "the rest, so it caps how long a prompt stalls live decodes; default is vLLM's for the "
        "GPU: 8192 on H100/H200, 2048 on A100/L4/L40S",
    )
    engine.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=GPU_MEMORY_UTILIZATION,
        help="fraction of GPU memory vLLM may use; what weights and activations leave of it is "
        f"the KV cache (default {GPU_MEMORY_UTILIZATION})",
    )
    engine.add_argument(
        "--max-model-len",
        type=_human_int_or_auto,
        help="longest prompt + output a request may have (e.g. 8192, 32k, 32K); the KV cache "
        "must hold one such request; 'auto' or -1 picks the longest that fits "
        "(default: the model's max_position_embeddings)",
    )
    engine.add_argument(
        "--enable-prefix-caching",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="reuse the KV blocks of a prompt's leading full blocks that an earlier request "
        "already computed (hashed per block, evicted least recently used); on by default, as "
        "in vLLM V1",
    )
    engine.add_argument(
        "--async-scheduling",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="schedule the next step while this one runs, so the host's CPU work hides behind "
        "the GPU's (vLLM's default on GPUs; its CPU backend runs without)",
    )
    engine.add_argument(
        "--num-gpu-blocks-override",
        type=int,
        metavar="BLOCKS",
        help="use exactly this many KV blocks instead of sizing from memory (as in vLLM; for "
        "experiments with a small cache)",
    )

    sim = parser.add_argument_group("simulation")
    sim.add_argument(
        "--engine",
        choices=list(ENGINES),
        default="vllm",
        help="the server the sim speaks as: vllm (these flags) or sglang (SGLang 0.5.23's API, "
        "/metrics and flags: see `slotop sim --engine sglang --help`)",
    )
    sim.add_argument(
        "--gpu",
        default=DEFAULT_GPU,
        choices=list(GPUS),
        help=f"GPU from the hardware table (default {DEFAULT_GPU})",
    )
    sim.add_argument(
        "--host-cpu",
        choices=list(HOSTS),
        help="the machine around the GPU, which sets the host's CPU time per step and the API "
        "server's time per request (default: the GPU's usual one; "
        + "; ".join(f"{name}: {host.description}" for name, host in HOSTS.items())
        + ")",
    )
    sim.add_argument(
        "--seed", type=int, default=SEED, help=f"seed for output lengths (default {SEED})"
    )
    add_behaviour_flags(sim)
    sim.add_argument(
        "--dry-run",
        action="store_true",
        help="print the KV-cache sizing as vLLM's start-up log would, and exit",
    )
    sim.add_argument("--json", action="store_true", help="with --dry-run: print JSON")
    return parser


def add_behaviour_flags(sim: argparse._ArgumentGroup) -> None:
    """The flags of the simulated behaviour that no engine has, shared by both engines' parsers:
    when EOS arrives, and when lateness is logged."""
    sim.add_argument(
        "--output-len-distribution",
        choices=["lognormal", "never"],
        default=CHAT_OUTPUT_LENGTHS.kind,
        help="when EOS arrives for requests without ignore_eos: 'lognormal' draws a length like "
        "chat traffic, 'never' runs every request to max_tokens (default lognormal)",
    )
    sim.add_argument(
        "--output-len-median",
        type=float,
        default=CHAT_OUTPUT_LENGTHS.median_tokens,
        metavar="TOKENS",
        help=f"median generated tokens before EOS (default {CHAT_OUTPUT_LENGTHS.median_tokens:g})",
    )
    sim.add_argument(
        "--output-len-sigma",
        type=float,
        default=CHAT_OUTPUT_LENGTHS.sigma,
        metavar="SIGMA",
        help="spread of ln(length); 0 makes every length the median "
        f"(default {CHAT_OUTPUT_LENGTHS.sigma:g})",
    )
    sim.add_argument(
        "--lag-log-threshold-ms",
        type=float,
        default=DEFAULT_LAG_LOG_THRESHOLD_MS,
        metavar="MS",
        help="log when tokens leave this much later than the simulated schedule "
        f"(default {DEFAULT_LAG_LOG_THRESHOLD_MS:g})",
    )


def config_from_args(args: argparse.Namespace, model: ModelSpec) -> EngineConfig:
    """Resolve parsed flags into an EngineConfig (SimConfigError on values vLLM would refuse)."""
    return resolve_engine_config(
        model,
        GPUS[args.gpu],
        tensor_parallel_size=args.tensor_parallel_size,
        kv_cache_dtype=args.kv_cache_dtype,
        block_size=args.block_size,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        gpu_memory_utilization=args.gpu_memory_utilization,
        max_model_len=args.max_model_len,
        seed=args.seed,
        output_lengths=OutputLengths(
            kind=args.output_len_distribution,
            median_tokens=args.output_len_median,
            sigma=args.output_len_sigma,
        ),
        num_gpu_blocks_override=args.num_gpu_blocks_override,
        enable_prefix_caching=args.enable_prefix_caching,
        async_scheduling=args.async_scheduling,
        host=host_by_name(args.host_cpu) if args.host_cpu else None,
    )


def dry_run_report(config: EngineConfig, capacity: KvCapacity) -> dict[str, object]:
    """The sizing as a JSON-ready mapping (what `--dry-run --json` prints)."""
    default_seqs, default_tokens = vllm_batch_defaults(config.gpu, config.tensor_parallel_size)
    return {
        "model": config.model.name,
        "gpu": config.gpu.name,
        "device_name": config.gpu.device_name,
        "host_cpu": config.host.name,
        "async_scheduling": config.async_scheduling,
        "tensor_parallel_size": config.tensor_parallel_size,
        "total_gpu_memory_bytes": config.gpu.memory_bytes,
        "gpu_memory_utilization": config.gpu_memory_utilization,
        "max_model_len": config.max_model_len,
        "max_num_seqs": config.max_num_seqs,
        "max_num_batched_tokens": config.max_num_batched_tokens,
        "vllm_default_max_num_seqs": default_seqs,
        "vllm_default_max_num_batched_tokens": default_tokens,
        **asdict(capacity),
    }


def dry_run_text(config: EngineConfig, capacity: KvCapacity) -> str:
    """The sizing as lines shaped like vLLM's start-up log."""
    gpu = config.gpu
    used = capacity.weights_bytes + capacity.activation_peak_bytes + capacity.non_torch_bytes
    lines = [
        f"model {config.model.name} on {config.tensor_parallel_size} x {gpu.device_name} "
        f"(simulated; tensor parallel size {config.tensor_parallel_size})",
        f"the current vLLM instance can use total_gpu_memory ({gpu.memory_bytes / _GIB:.2f}GiB)"
        f" x gpu_memory_utilization ({config.gpu_memory_utilization:.2f}) = "
        f"{capacity.requested_memory_bytes / _GIB:.2f}GiB",
        f"model weights take {capacity.weights_bytes / _GIB:.2f}GiB; non_torch_memory takes "
        f"{capacity.non_torch_bytes / _GIB:.2f}GiB; PyTorch activation peak memory (with CUDA "
        f"graphs) takes {capacity.activation_peak_bytes / _GIB:.2f}GiB; the rest of the memory "
        f"reserved for KV Cache is {capacity.available_kv_cache_bytes / _GIB:.2f}GiB "
        f"({used / _GIB:.2f}GiB used otherwise)",
        f"KV cache dtype {capacity.cache_dtype} ({capacity.dtype_bytes} byte(s) per element): "
        f"{capacity.bytes_per_token:,} bytes per token per GPU, {capacity.block_size} tokens "
        f"per block",
        f"GPU KV cache size: {capacity.kv_cache_size_tokens:,} tokens "
        f"({capacity.num_gpu_blocks:,} blocks)",
        f"Maximum concurrency for {config.max_model_len:,} tokens per request: "
        f"{capacity.max_concurrency:.2f}x",
        f"max_num_seqs={config.max_num_seqs}, max_num_batched_tokens="
        f"{config.max_num_batched_tokens}, block_size={config.block_size}",
    ]
    return "\n".join(lines) + "\n"


# Not engine settings (or secret): never in the start-up line.
_NOT_SERVER_ARGS = frozenset({"dry_run", "json", "api_key", "engine"})


def _non_default_args(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> tuple[tuple[str, object], ...]:
    """The flags given with a value other than their default, in vLLM's snake_case names."""
    return tuple(
        (name, value)
        for name, value in vars(args).items()
        if name not in _NOT_SERVER_ARGS and value != parser.get_default(name)
    )


def engine_of(argv: Sequence[str]) -> str:
    """The `--engine` that `argv` asks for (the last one given), else vllm; a bad one is left to
    the parser to refuse."""
    picker = argparse.ArgumentParser(add_help=False)
    picker.add_argument("--engine", default="vllm")
    known, _ = picker.parse_known_args(list(argv))
    return str(known.engine)


def main(argv: Sequence[str] | None = None) -> int:
    """Run `slotop sim` with `argv` (default: the process arguments) and return the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if engine_of(argv) == "sglang":
        from slotop.sim.sglang.flags import main as sglang_main

        return sglang_main(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.json and not args.dry_run:
        parser.error("--json only goes with --dry-run")
    if args.model and args.model_tag and args.model != args.model_tag:
        parser.error(f"two models given: {args.model_tag!r} and --model {args.model!r}")
    model_name = args.model or args.model_tag or DEFAULT_MODEL
    try:
        model = model_by_name_or_path(model_name)
    except SimConfigError as exc:
        parser.error(str(exc))
    try:
        config = config_from_args(args, model)
        capacity = kv_capacity(config)
    except SimConfigError as exc:
        print(f"slotop sim: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    if args.dry_run:
        if args.json:
            sys.stdout.write(json.dumps(dry_run_report(config, capacity), indent=2) + "\n")
        else:
            sys.stdout.write(dry_run_text(config, capacity))
        return EXIT_OK
    options = ServeOptions(
        host=args.host,
        port=args.port,
        served_model_names=tuple(args.served_model_name or (config.model.name,)),
        api_key=args.api_key or os.environ.get("VLLM_API_KEY") or None,
        lag_log_threshold_s=args.lag_log_threshold_ms / 1e3,
        non_default_args=_non_default_args(parser, args),
    )
    try:
        from slotop.sim.server import serve

        return serve(config, options)
    except SimError as exc:
        print(f"slotop sim: error: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130
