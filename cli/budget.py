"""`slotop budget`: the KV cache in bytes, and the sequences it holds, per dtype."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from slotop.cli.common import EXIT_OK, EXIT_USAGE, add_common
from slotop.config import Settings

_BUDGET_EPILOG = """\
the formula (per GPU):
  bytes per token = 2 (K and V) × layers × kv_heads_per_gpu × head_dim × dtype bytes
                    (kv heads split across tensor-parallel ranks; auto = the model's dtype,
                    bfloat16/float16 2 bytes, fp8 1 byte, float32 4 bytes)
  KV memory       = GPU memory × gpu_memory_utilization − weights − overheads
  blocks          = KV memory // (bytes per token × block size)
  sequences       = blocks / ceil(length / block size), at max context and at --avg-len

  Llama-3.1-8B: 2 × 32 × 8 × 128 × 2 = 131,072 B/token (128 KiB); fp8 halves it.

  SGLang (--url): its pool is max_total_num_tokens (reported), in pages of page_size; at
  another dtype the same bytes hold tokens × old bytes // new bytes, held at
  --max-total-tokens; sequences = pages / ceil(context length / page size).

examples:
  slotop budget --model llama-3.1-8b --gpu h100-sxm --avg-len 2000
  slotop budget --config-json ./config.json --gpu-memory-gib 80 -tp 2 --max-model-len 32768
  slotop budget --url http://127.0.0.1:8000 --json
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `slotop budget` and its flags."""
    parser = sub.add_parser(
        "budget",
        help="size the KV cache in bytes: tokens, blocks and sequences that fit, per dtype",
        description="Size the KV cache per dtype from a model config.json and a GPU's memory, "
        "from the simulator's tables, or from a live replica: vLLM's vllm:cache_config_info, "
        "SGLang's /get_server_info (its pool in tokens, max_total_num_tokens).",
        epilog=_BUDGET_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common(parser)
    source = parser.add_argument_group("source (one of)")
    source.add_argument("--config-json", type=Path, metavar="PATH", help="a model's config.json")
    source.add_argument("--model", metavar="NAME", help="a simulator table model (with --gpu)")
    source.add_argument("--gpu", metavar="NAME", help="a simulator table GPU, e.g. h100-sxm")
    source.add_argument(
        "--url", metavar="URL", help="a live vLLM or SGLang replica: read its KV cache's size"
    )
    sizes = parser.add_argument_group("sizes")
    sizes.add_argument("--gpu-memory-gib", type=float, metavar="GIB", help="one GPU's memory")
    sizes.add_argument(
        "--gpu-memory-utilization", type=float, metavar="RATIO", help="share vLLM takes (0.9)"
    )
    sizes.add_argument(
        "--tensor-parallel-size", "-tp", type=int, default=1, metavar="N", help="GPUs per model"
    )
    sizes.add_argument("--max-model-len", type=int, metavar="TOKENS", help="max context")
    sizes.add_argument("--avg-len", type=int, metavar="TOKENS", help="average sequence length")
    sizes.add_argument("--block-size", type=int, metavar="TOKENS", help="tokens per block (16)")
    sizes.add_argument("--weights-gib", type=float, metavar="GIB", help="weights per GPU, exact")
    sizes.add_argument(
        "--overhead-gib", type=float, metavar="GIB", help="activations, graphs, context (2.0)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace, settings: Settings) -> int:
    import json

    from slotop.actions.budget.report import budget_to_json, format_budget_text
    from slotop.actions.budget.sources import BudgetRequest, BudgetUsageError, resolve_budget

    request = BudgetRequest(
        config_json=args.config_json,
        model=args.model,
        gpu=args.gpu,
        url=args.url,
        api_key=settings.replica.api_key,
        timeout_s=settings.replica.timeout_s,
        gpu_memory_gib=args.gpu_memory_gib,
        gpu_memory_utilization=args.gpu_memory_utilization,
        tensor_parallel_size=args.tensor_parallel_size,
        max_model_len=args.max_model_len,
        avg_len=args.avg_len,
        block_size=args.block_size,
        weights_gib=args.weights_gib,
        overhead_gib=args.overhead_gib,
    )
    try:
        budget = resolve_budget(request)
    except BudgetUsageError as exc:
        print(f"slotop budget: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        sys.stdout.write(json.dumps(budget_to_json(budget), indent=2, allow_nan=False) + "\n")
    else:
        sys.stdout.write(format_budget_text(budget))
    return EXIT_OK
