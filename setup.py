"""The package list for setuptools: every package under the repository root, named under slotop.

The root is the package `slotop` (pyproject.toml maps it to "."), and setuptools' automatic
discovery would name its subpackages bare (`tui`, not `slotop.tui`), so they are found here and
prefixed. Everything else about the build lives in pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

from setuptools import find_packages, setup

# Folders of the checkout for development and builds, never installed (.ci and .venv* are skipped
# by find_packages already: a dotted folder name is never a package).
DEVELOPMENT_ONLY = ("tests", "bench", "build", "dist")

SUBPACKAGES = find_packages(
    where=str(Path(__file__).resolve().parent),
    exclude=[pattern for name in DEVELOPMENT_ONLY for pattern in (name, f"{name}.*")],
)

setup(
    packages=["slotop", *(f"slotop.{name}" for name in SUBPACKAGES)],
    # This file lies in the package's folder; naming it keeps it out of the package's modules
    # (build backends run it with their own script in sys.argv[0]).
    script_name=Path(__file__).name,
)
