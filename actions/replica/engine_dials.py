"""Each engine's words for the three dials: its flags, its KV dtypes, and how a command names it.

The dials are canonical (vLLM's names: kv_cache_dtype, max_num_seqs, max_num_batched_tokens);
SGLang turns the same three with `--kv-cache-dtype`, `--max-running-requests` and
`--chunked-prefill-size`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from types import MappingProxyType

from slotop.collectors.engines import engine_label
from slotop.collectors.names import Engine
from slotop.config import LAUNCH_DIAL_FLAGS, SGLANG_DIAL_FLAGS

DIAL_FLAGS: Mapping[Engine, tuple[str, ...]] = MappingProxyType(
    {"vllm": LAUNCH_DIAL_FLAGS, "sglang": SGLANG_DIAL_FLAGS}
)
"""Each engine's flags for kv_cache_dtype, max_num_seqs and max_num_batched_tokens, in order."""

KV_CACHE_DTYPES: Mapping[Engine, tuple[str, ...]] = MappingProxyType(
    {
        # vLLM 0.32's CacheDType; older and newer releases differ, so vLLM itself has the last word.
        "vllm": (
            "auto",
            "float16",
            "bfloat16",
            "fp8",
            "fp8_e4m3",
            "fp8_e5m2",
            "fp8_inc",
            "fp8_ds_mla",
            "nvfp4",
        ),
        # SGLang 0.5.23's `--kv-cache-dtype` choices (`sglang.launch_server --help`).
        "sglang": (
            "auto",
            "fp8_e5m2",
            "fp8_e4m3",
            "mxfp8",
            "bf16",
            "bfloat16",
            "nvfp4",
            "fp4_mx_block16",
        ),
    }
)
"""The `--kv-cache-dtype` values each engine names."""

SGLANG_MODULE = "sglang.launch_server"


def engine_of_command(argv: Sequence[str]) -> Engine | None:
    """The engine a launch command starts: SGLang for `python -m sglang.launch_server`, a path
    to its `launch_server.py`, or `sglang serve`; vLLM for `vllm serve` or
    `-m vllm.entrypoints...`; None when the command names neither (a wrapper script)."""
    for index, argument in enumerate(argv):
        path = PurePath(argument)
        if argument == SGLANG_MODULE or path.parts[-2:] == ("sglang", "launch_server.py"):
            return "sglang"
        following = argv[index + 1] if index + 1 < len(argv) else ""
        if path.name == "sglang" and following == "serve":
            return "sglang"
        if path.name == "vllm" and following == "serve":
            return "vllm"
        if argument.startswith("vllm.entrypoints"):
            return "vllm"
    return None


def kv_dtype_problem(engine: Engine, kv_cache_dtype: str) -> str | None:
    """Why the engine cannot take a KV dtype, None when it can.

    SGLang's choices are checked in full (its parser refuses any other); for vLLM only a value
    SGLang alone names is refused, and vLLM is left to judge the rest (its choices change
    between releases).
    """
    choices = KV_CACHE_DTYPES[engine]
    if kv_cache_dtype in choices:
        return None
    others = {
        e for e, values in KV_CACHE_DTYPES.items() if e != engine and kv_cache_dtype in values
    }
    if engine == "vllm" and not others:
        return None
    whose = f" (only {engine_label(others.pop())} names it)" if others else ""
    return (
        f"{engine_label(engine)} takes no --kv-cache-dtype {kv_cache_dtype!r}{whose}; "
        f"{engine_label(engine)}'s choices: {', '.join(choices)}"
    )
