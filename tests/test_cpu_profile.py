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
    with cpu_profile.measured("tests/test_a.py::test_busy"):
        time.sleep(0.05)
        _spin(0.2)
    ((nodeid, wall, own, children),) = (line.split("\t") for line in path.read_text().splitlines())
    assert nodeid == "tests/test_a.py::test_busy"
    assert float(wall) >= 0.25 and 0.2 <= float(own) < float(wall)
    assert float(children) == 0.0


def test_modules_are_summed_most_cpu_first() -> None:
    lines = [
        "tests/a.py::test_one\t10.0\t1.0\t30.0",
        "tests/a.py::test_two[x y]\t5.0\t2.0\t0.0",
        "tests/b.py::test_one\t40.0\t40.0\t0.0",
        "",
    ]
    rows = cpu_profile.by_module(lines)
    assert [(r.module, r.tests, r.wall_s, r.cpu_s) for r in rows] == [
        ("tests/b.py", 1, 40.0, 40.0),
        ("tests/a.py", 2, 15.0, 33.0),
    ]
    text = cpu_profile.summary(rows, top=1)
    assert text.splitlines()[1].split() == ["40.0", "40.0", "0.0", "40.0", "1", "tests/b.py"]
    assert text.splitlines()[-1].split()[:5] == ["73.0", "43.0", "30.0", "55.0", "3"]
    assert len(text.splitlines()) == 3


def test_a_line_out_of_form_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match=r"cpu\.tsv, line 2: expected nodeid, wall_s"):
        cpu_profile.by_module(["t.py::a\t1\t1\t1", "t.py::b\t1\tlots\t1"], "cpu.tsv")
    bad = tmp_path / "cpu.tsv"
    bad.write_text("t.py::a\t1\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        cpu_profile.main([str(bad)])
    assert exit_info.value.code == 2
    assert f"{bad}, line 1: expected" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cpu_profile.main([str(tmp_path / "missing.tsv")])
    assert "No such file" in capsys.readouterr().err
