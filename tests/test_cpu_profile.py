"""The suite's CPU account (tests/support/cpu_profile.py): a line per test, summed by module."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support import cpu_profile


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_test_is_noted_with_its_own_cpu_only_where_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cpu.tsv"
    monkeypatch.delenv(cpu_profile.ENV, raising=False)
    with cpu_profile.measured("tests/test_a.py::test_quiet"):
        _spin(0.05)
    assert not path.exists()
    monkeypatch.setenv(cpu_profile.ENV, str(path))
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw7")
    before = time.time()
    with cpu_profile.measured("tests/test_a.py::test_busy"):
        time.sleep(0.05)
        _spin(0.2)
    (test,) = cpu_profile.parse(path.read_text().splitlines())
    assert test.nodeid == "tests/test_a.py::test_busy"
    assert test.wall_s >= 0.25 and 0.2 <= test.own_cpu_s < test.wall_s
    assert test.processes_cpu_s == 0.0
    assert test.worker == "gw7" and before + 0.25 <= test.ended_at <= time.time() + 0.001


LINES = [
    "tests/a.py::test_one\t10.0\t1.0\t30.0\tgw0\t1010.0",
    "tests/a.py::test_two[x y]\t5.0\t2.0\t0.0\tgw0\t1016.0",
    "tests/b.py::test_one\t40.0\t40.0\t0.0\tgw1\t1045.0",
    "",
]
"""gw0 runs a.py's two tests from t=0 (idle a second between them); gw1 runs b.py from t=5."""


def test_modules_are_summed_most_cpu_first() -> None:
    rows = cpu_profile.by_module(cpu_profile.parse(LINES))
    assert [(r.module, r.tests, r.wall_s, r.cpu_s) for r in rows] == [
        ("tests/b.py", 1, 40.0, 40.0),
        ("tests/a.py", 2, 15.0, 33.0),
    ]
    text = cpu_profile.summary(rows, top=1)
    assert text.splitlines()[1].split() == ["40.0", "40.0", "0.0", "40.0", "1", "tests/b.py"]
    assert text.splitlines()[-1].split()[:5] == ["73.0", "43.0", "30.0", "55.0", "3"]
    assert len(text.splitlines()) == 3


def test_each_workers_busy_time_and_finish_are_counted_from_the_first_start() -> None:
    spans = cpu_profile.by_worker(cpu_profile.parse(LINES))
    assert spans == [
        cpu_profile.WorkerSpan("gw1", 1, 40.0, 45.0, "tests/b.py"),
        cpu_profile.WorkerSpan("gw0", 2, 15.0, 16.0, "tests/a.py"),
    ]
    text = cpu_profile.worker_summary(spans)
    assert text.splitlines()[1].split() == ["40.0", "45.0", "1", "gw1", "tests/b.py"]
    assert cpu_profile.by_worker([]) == []


def test_a_line_out_of_form_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"cpu\.tsv, line 2: expected nodeid, wall_s"):
        cpu_profile.parse(["t.py::a\t1\t1\t1\tgw0\t9", "t.py::b\t1\tlots\t1\tgw0\t9"], "cpu.tsv")
    bad = tmp_path / "cpu.tsv"
    bad.write_text("t.py::a\t1\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        cpu_profile.main([str(bad)])
    assert exit_info.value.code == 2
    assert f"{bad}, line 1: expected" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cpu_profile.main([str(tmp_path / "missing.tsv")])
    assert "No such file" in capsys.readouterr().err
