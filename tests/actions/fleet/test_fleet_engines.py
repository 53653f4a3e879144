"""A fleet scraped directly holds vLLM and SGLang replicas side by side: each row says its
engine, and a model's row merges one engine's buckets only, even where both serve one name."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

import pytest

from slotop.cli import main
from tests.support.http_answers import Answer, Request, http_answers
from tests.support.paths import CAPTURES

ENGINES = {
    "vllm": {
        "/metrics": "vllm-0.32-cpu-load.txt",
        "/version": "vllm-0.32-cpu-version.json",
        "/v1/models": "vllm-0.32-cpu-models.json",
    },
    "sglang": {
        "/metrics": "sglang-0.5.23-cpu-load.txt",
        "/get_server_info": "sglang-0.5.23-cpu-server-info.json",
        "/v1/loads": "sglang-0.5.23-cpu-loads-idle.json",
        "/v1/models": "sglang-0.5.23-cpu-models.json",
    },
}


def _captured(files: dict[str, str]) -> Callable[[Request], Answer]:
    def answer(request: Request) -> Answer:
        if request.path == "/health":
            return Answer(200)
        name = files.get(request.path)
        if name is None:
            return Answer(404, b'{"detail":"Not Found"}')
        return Answer(200, (CAPTURES / name).read_bytes())

    return answer


@contextmanager
def _replicas() -> Iterator[dict[str, str]]:
    with ExitStack() as stack:
        yield {
            engine: stack.enter_context(http_answers(_captured(files))).url
            for engine, files in ENGINES.items()
        }


def test_a_direct_fleet_holds_both_engines_apart(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)
    with _replicas() as urls:
        code = main(["fleet", *urls.values(), "--json", "--window", "0.5"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["mode"] == "direct", data
    engines = {row["url"]: row["engine"] for row in data["replicas"]}
    assert engines == {url: engine for engine, url in urls.items()}
    assert {row["model"] for row in data["replicas"]} == {"tiny-llama"}
    # Both serve "tiny-llama": two model rows, one an engine, never their buckets merged.
    assert sorted((row["engine"], row["model"], row["replicas"]) for row in data["models"]) == [
        ("sglang", "tiny-llama", 1),
        ("vllm", "tiny-llama", 1),
    ]
    sglang = next(row for row in data["replicas"] if row["engine"] == "sglang")
    assert sglang["requests"]["running"] == 0  # the scheduler, asked: idle (its gauges said 4)
