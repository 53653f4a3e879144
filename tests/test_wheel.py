"""A wheel built from the repository installs, imports and runs as users get it, outside the tree.

The editable install resolves `slotop.*` from the working tree, so a subpackage or data file left
out of the wheel only shows after `pip install .`, `pipx install .` or `uv tool install .`. These
tests build the wheel the way those do (offline, with this Python's setuptools), install it into a
fresh virtual environment under tmp_path, and run it from a directory outside the source tree.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# Top-level folders of the checkout that belong to development, never to the installed package.
DEVELOPMENT_ONLY = frozenset({"tests", "bench", ".ci", "build", "dist"})
# Data files the installed package reads, by their path inside the package (besides every *.tcss).
PACKAGE_DATA = frozenset(
    {"sample.toml", "py.typed", "web/page/index.html", "web/page/web.js", "web/page/web.css"}
)
# Modules at the root that build the package and are not part of it.
BUILD_SCRIPTS = frozenset({"setup.py"})
# What a module missing from the wheel most often means.
NOT_A_PACKAGE_HINT = "(a folder ships only as a package: with an __init__.py, found by setup.py)"
# Llama-3.1-8B's KV cache per token, worked by hand: 2 (K, V) x 32 layers x 8 heads x 128 x 2 bytes.
LLAMA_8B_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2

# Run by the fresh venv's Python: import every module found in the installed package, and say where
# the package and its data files are.
IMPORT_EVERYTHING = """
import importlib, json, pathlib, pkgutil, sys
import slotop

def fail(name):
    raise ImportError(f"cannot walk {name}")

names = []
for info in pkgutil.walk_packages(slotop.__path__, "slotop.", onerror=fail):
    importlib.import_module(info.name)
    names.append(info.name)
root = pathlib.Path(slotop.__file__).parent
data = sorted(
    path.relative_to(root).as_posix()
    for path in root.rglob("*")
    if path.is_file() and path.suffix not in (".py", ".pyc")
)
json.dump({"file": slotop.__file__, "modules": names, "data": data}, sys.stdout)
"""


@dataclass(frozen=True, slots=True)
class Installed:
    """A wheel built from a copy of the checkout, installed into a fresh virtual environment."""

    checkout_files: tuple[str, ...]
    wheel: Path
    venv: Path
    workdir: Path

    def bin(self, name: str) -> Path:
        """The path of an executable in the venv's scripts folder."""
        scripts = "Scripts" if os.name == "nt" else "bin"
        return self.venv / scripts / name

    def run(self, *argv: str | Path) -> subprocess.CompletedProcess[str]:
        """Run a command from the outside directory, with nothing pointing Python at the tree."""
        environ = {
            key: value
            for key, value in os.environ.items()
            if key not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
        }
        return subprocess.run(
            [str(arg) for arg in argv],
            cwd=self.workdir,
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )


def _checkout_files(root: Path) -> list[str]:
    """The files a clean checkout holds: tracked ones plus new ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    )
    return sorted({name for name in listed.stdout.decode().split("\0") if name})


def _copy_checkout(root: Path, names: list[str], destination: Path) -> None:
    """Copy the checkout, so the build's own folders stay out of the working tree and no stale
    build/lib from an earlier build can slip into the wheel."""
    for name in names:
        source = root / name
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the working tree, not yet in the index
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)


def _run_checked(argv: list[str | Path], what: str) -> None:
    """Run a build or install step, failing with its output when it fails."""
    result = subprocess.run(
        [str(arg) for arg in argv], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{what} failed:\n{result.stdout}\n{result.stderr}"


def _dependency_paths() -> list[str]:
    """The site-packages folders that give this Python its third-party packages."""
    paths = [
        *site.getsitepackages(),
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    ]
    return list(dict.fromkeys(paths))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """Build the wheel without build isolation (offline) and install it, without dependencies,
    into a fresh venv that borrows this Python's third-party packages through a .pth file."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    checkout_files = _checkout_files(ROOT)
    _copy_checkout(ROOT, checkout_files, source)
    dist = base / "dist"
    _run_checked(
        [
            sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
            "--check-build-dependencies", "--no-index", "--quiet", "-w", dist, source,
        ],
        "building the wheel (pip install -e '.[dev]' brings the setuptools it needs)",
    )  # fmt: skip
    wheels = sorted(dist.glob("slotop-*.whl"))
    assert len(wheels) == 1, f"expected one slotop wheel in {dist}, found {wheels}"

    venv = base / "venv"
    _run_checked([sys.executable, "-m", "venv", "--without-pip", venv], "creating the venv")
    installed = Installed(
        checkout_files=tuple(checkout_files),
        wheel=wheels[0],
        venv=venv,
        workdir=base / "elsewhere",
    )
    installed.workdir.mkdir()
    python = installed.bin("python")
    _run_checked(
        [
            sys.executable, "-m", "pip", "--python", python, "install", "--no-deps",
            "--no-index", "--quiet", wheels[0],
        ],
        "installing the wheel",
    )  # fmt: skip
    purelib = installed.run(
        python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    )
    site_packages = Path(purelib.stdout.strip())
    assert site_packages.is_dir(), purelib.stderr
    # Lines of a .pth file are appended to sys.path; the .pth files in those folders (the
    # editable install's finder among them) are not run, so the working tree stays unreachable.
    (site_packages / "borrowed_dependencies.pth").write_text("\n".join(_dependency_paths()) + "\n")
    return installed


def _expected_package_files(checkout_files: tuple[str, ...]) -> tuple[set[str], set[str]]:
    """The modules and data files a wheel must ship, from the checkout's own files."""
    modules: set[str] = set()
    data: set[str] = set()
    for name in checkout_files:
        path = PurePosixPath(name)
        if path.parts[0] in DEVELOPMENT_ONLY or path.parts[0].startswith("."):
            continue
        if path.suffix == ".py" and name not in BUILD_SCRIPTS:
            modules.add(name)
        elif path.suffix == ".tcss" or name in PACKAGE_DATA:
            data.add(name)
    return modules, data


def test_the_wheel_ships_every_module_and_data_file_and_no_development_folder(
    installed: Installed,
) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        listing = [name for name in wheel.namelist() if not name.endswith("/")]
    in_package = {name.removeprefix("slotop/") for name in listing if name.startswith("slotop/")}
    modules, data = _expected_package_files(installed.checkout_files)
    assert {"tui/app.tcss", "sample.toml", "py.typed", "tui/panes/__init__.py"} <= modules | data

    missing = sorted((modules | data) - in_package)
    assert not missing, f"files missing from the wheel {NOT_A_PACKAGE_HINT}: {missing}"
    development = sorted(
        name for name in in_package if PurePosixPath(name).parts[0] in DEVELOPMENT_ONLY
    )
    assert not development, f"development folders in the wheel: {development}"
    extra = sorted(in_package - modules - data)
    assert not extra, f"files in the wheel that are not the package's: {extra}"
    outside = sorted(
        name for name in listing if not name.startswith("slotop/") and ".dist-info/" not in name
    )
    assert not outside, f"files in the wheel outside slotop/ and its .dist-info: {outside}"


def test_the_installed_package_imports_every_module_from_the_venv(installed: Installed) -> None:
    result = installed.run(installed.bin("python"), "-c", IMPORT_EVERYTHING)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)

    package_file = Path(report["file"]).resolve()
    assert package_file.is_relative_to(installed.venv.resolve()), package_file
    assert not package_file.is_relative_to(ROOT), (
        f"slotop was imported from the tree: {package_file}"
    )
    modules, data = _expected_package_files(installed.checkout_files)
    expected = {
        "slotop." + name.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for name in modules
        if name != "__init__.py"
    }
    lacking = sorted(expected - set(report["modules"]))
    assert not lacking, f"modules the installed package lacks {NOT_A_PACKAGE_HINT}: {lacking}"
    assert set(report["data"]) == data


def test_the_installed_console_script_answers_help(installed: Installed) -> None:
    result = installed.run(installed.bin("slotop"), "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: slotop")
    for command in ("demo", "attach", "sweep", "budget", "restart", "sim"):
        assert command in result.stdout


def test_the_installed_sim_sizes_a_replica_as_json(installed: Installed) -> None:
    result = installed.run(
        installed.bin("slotop"),
        "sim", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--dry-run", "--json",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert report["bytes_per_token"] == LLAMA_8B_BYTES_PER_TOKEN
    assert report["num_gpu_blocks"] > 0
