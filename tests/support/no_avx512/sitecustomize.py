"""Loaded by a vLLM test replica when SLOTOP_VLLM_HIDE_AVX512=1: torch says this CPU has neither
AVX-512 nor AMX, so vLLM's CPU build refuses an fp8 KV cache as it does on such a host ("FP8 KV
cache on CPU requires x86 with AVX-512 or AMX"). It only changes what those two checks answer:
the suite's way to run, on any host, the tests a host without AVX-512 runs."""

import torch

torch.cpu._is_avx512_supported = lambda: False  # type: ignore[attr-defined]
torch.cpu._is_amx_tile_supported = lambda: False  # type: ignore[attr-defined]
