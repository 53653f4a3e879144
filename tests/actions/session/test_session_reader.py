"""Reading a recording back: its schema checked, a cut-short last line read past, garbage refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slotop.actions.session.reader import SessionFormatError, parse_lines, read_recording

HEADER = (
    '{"schema":"slotop.session/1","slotop_version":"0.1.0","started_at_s":100.0,'
    '"command":"attach","settings":{},"replica":{"url":"http://127.0.0.1:8000"}}\n'
)
EVENT = '{"kind":"event","t_s":101.5,"event":"probe","text":"load on"}\n'
END = '{"kind":"end","t_s":102.0,"reason":"closed"}\n'


def test_a_whole_recording_reads() -> None:
    recording = parse_lines([HEADER, EVENT, END], "s.jsonl")
    assert recording.header.command == "attach" and recording.header.schema_version == 1
    assert recording.header.replica["url"] == "http://127.0.0.1:8000"
    assert [(line.kind, line.t_s, line.line_number) for line in recording.lines] == [
        ("event", 101.5, 2),
        ("end", 102.0, 3),
    ]
    assert recording.ended and recording.notes == () and recording.last_t_s == 102.0


def test_a_cut_short_last_line_is_read_past_with_a_note() -> None:
    recording = parse_lines([HEADER, EVENT, '{"kind":"reading","t_s":10'], "s.jsonl")
    assert [line.kind for line in recording.lines] == ["event"]
    assert not recording.ended
    assert recording.notes == (
        "s.jsonl:3: the last line is cut short (26 characters, the writer was stopped "
        "mid-line); read up to the line before",
    )


@pytest.mark.parametrize(
    ("lines", "words"),
    [
        ([], "s.jsonl: empty; a recording starts with its header line"),
        (
            [HEADER.replace("slotop.session/1", "slotop.session/2"), EVENT],
            "s.jsonl: recorded with schema slotop.session/2, newer than this slotop reads "
            "(slotop.session/1); it needs a slotop that reads slotop.session/2: upgrade slotop",
        ),
        (
            [HEADER.replace("slotop.session/1", "slotop.session/0")],
            "s.jsonl: recorded with schema slotop.session/0, which this slotop no longer reads",
        ),
        (
            [HEADER.replace("slotop.session/1", "slotop.snapshot/1")],
            "s.jsonl: not a slotop session recording (no slotop.session header: its first line "
            "is schema 'slotop.snapshot/1')",
        ),
        ([HEADER, "not json\n", END], "s.jsonl:2: not a JSON line"),
        ([HEADER, "[1, 2]\n"], "s.jsonl:2: a list, not a JSON object"),
        ([HEADER, '{"kind":"event"}\n'], "s.jsonl:2: a line needs a string kind and a numeric"),
        ([HEADER.replace('"command":"attach",', "")], "s.jsonl: the header lacks or garbles"),
    ],
)
def test_what_is_refused_says_where_and_why(lines: list[str], words: str) -> None:
    with pytest.raises(SessionFormatError) as raised:
        parse_lines(lines, "s.jsonl")
    assert words in str(raised.value)


def test_a_file_reads_and_a_missing_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text(HEADER + EVENT, encoding="utf-8")
    assert len(read_recording(path).lines) == 1
    with pytest.raises(SessionFormatError, match=r"nope\.jsonl: cannot read the recording"):
        read_recording(tmp_path / "nope.jsonl")


def test_a_damaged_reading_line_is_named_with_its_line(tmp_path: Path) -> None:
    monitor = json.dumps(
        {"kind": "monitor", "t_s": 100.5, "url": "u", "long_window_s": 60, "short_window_s": 10,
         "interval_s": 1, "ttft_percentile": 99, "itl_percentile": 99}
    )  # fmt: skip
    bad = '{"kind":"reading","t_s":101,"mono_s":1,"set":[5,1]}'
    recording = parse_lines([HEADER, monitor + "\n", bad + "\n"], "s.jsonl")
    with pytest.raises(SessionFormatError, match=r"s\.jsonl:3: set names slot 5, never declared"):
        list(recording.readings())
