"""Under pytest-xdist's `--dist loadgroup` (the README's test command and the quick loop), each
module's tests run on one worker, so a module's fixtures start once, and the modules that use an
engine's session server share one, so it starts once. The group is a mark that tests/conftest.py
adds at collection; xdist reads the marks in a collection hook of its own, so ours must run
first, or every test goes wherever the scheduler sends it and a module's fixture starts on each
worker."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import longest_first, xdist_groups
from tests.support import cpu_profile

ROOT = Path(__file__).resolve().parents[1]
MODULES = ("tests/test_fmt.py", "tests/test_slo.py")
"""Two quick modules of many tests each: scheduled with no groups, both are split over workers."""

RESULT = re.compile(r"^\[(gw\d+)\] .*?PASSED (\S+) *$", re.MULTILINE)


def test_users_of_a_session_server_share_a_group_and_other_modules_keep_their_own() -> None:
    tests = [
        ("tests/a/test_one.py::test_x", {"tmp_path"}),
        ("tests/a/test_one.py::test_y", {"vllm_replica", "tmp_path"}),
        ("tests/b/test_two.py::test_z", {"vllm_replica"}),
        ("tests/c/test_own.py::test_restarts[1]", {"tiny_model_dir"}),
        ("tests/c/test_own.py::test_restarts[2]", {"tiny_model_dir"}),
        ("tests/d/test_sg.py::test_w", {"sglang_replica"}),
        ("tests/e/test_plain.py::test_v", set()),
    ]
    assert xdist_groups(tests) == [
        "vllm",  # a module with one user of the session server goes whole with the others
        "vllm",
        "vllm",
        "tests/c/test_own.py",  # its own replica: free to run beside the session's
        "tests/c/test_own.py",
        "sglang",
        "tests/e/test_plain.py",
    ]


def test_groups_that_run_engines_go_first_then_slow_ones_each_keeping_its_order() -> None:
    groups = ["a.py", "a.py", "vllm", "b.py", "c.py", "vllm", "d.py"]
    marks = [set(), {"slow"}, {"vllm"}, set(), {"sglang", "slow"}, set(), {"slow"}]
    # vllm (a test of it starts an engine) and c.py; then a.py and d.py, which have slow tests
    assert longest_first(groups, marks) == [2, 4, 5, 0, 1, 6, 3]
    assert longest_first([], []) == []


@pytest.mark.slow
def test_each_module_runs_on_one_worker_under_loadgroup() -> None:
    options = ["-n", "2", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"]
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *options,
            "-o",
            "addopts=--import-mode=importlib",
            *MODULES,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        # the run's CPU counts once, as this test's processes (`cpu_profile`)
        env={k: v for k, v in os.environ.items() if k != cpu_profile.ENV},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    workers: dict[str, set[str]] = defaultdict(set)
    for worker, nodeid in RESULT.findall(run.stdout):
        test, _, group = nodeid.partition("@")
        module = test.split("::")[0]
        assert group == module, f"{nodeid} ran outside its module's group"
        workers[module].add(worker)
    assert sorted(workers) == sorted(MODULES), run.stdout[-3000:]
    for module, seen in workers.items():
        assert len(seen) == 1, f"{module}'s tests ran on {sorted(seen)}"
