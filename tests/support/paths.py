"""Where the tests' files are: the tests folder, the repository root, captures, helper scripts."""

from __future__ import annotations

import os
from pathlib import Path

SUPPORT_DIR = Path(__file__).resolve().parent
TESTS_DIR = SUPPORT_DIR.parent
REPO_ROOT = TESTS_DIR.parent

CAPTURES = TESTS_DIR / "fixtures" / "metrics"
"""Real vLLM CPU /metrics captures (tests/fixtures/metrics/README.md says how each was made)."""

WRITTEN = TESTS_DIR / "fixtures" / "files"
"""Files an older slotop wrote (a sweep JSON, a recording's header): this one must read them."""

TINY_MODEL_SCRIPT = SUPPORT_DIR / "tiny_model.py"
"""Run by the vLLM venv's Python: writes the tiny Llama's config and tokenizer."""

STUB_REPLICA = SUPPORT_DIR / "stub_replica.py"
"""Run by path as a replica command: the simulated replica, or one that hangs (its docstring)."""

ARTEFACTS = Path(os.environ.get("SLOTOP_TEST_ARTEFACTS") or REPO_ROOT / "var" / "test-artefacts")
"""Files tests keep for a person to look at (screenshots): $SLOTOP_TEST_ARTEFACTS, else var/."""
