"""`slotop snapshot URL --json` against the real vLLM CPU replica under load."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest

from slotop.cli import main

pytestmark = [pytest.mark.vllm, pytest.mark.slow]


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def _under_load(data: dict[str, Any]) -> bool:
    return bool(
        data["requests"]["running"]
        and data["ttft_s"]["count"]
        and data["itl_s"]["count"]
        and data["throughput"]["generation_tokens_per_s"]
    )


def test_snapshot_json_of_a_loaded_replica(
    vllm_replica: Any, load_driver: Callable[..., Any], capsys: pytest.CaptureFixture[str]
) -> None:
    url = vllm_replica.url
    enough = threading.Event()  # set once a window caught the load: no more requests are sent
    load = threading.Thread(
        target=load_driver,
        kwargs={
            "url": url,
            "concurrency": 8,
            "requests": 96,
            "max_tokens": 128,
            "prompt_tokens": 128,
            "stop": enough,
        },
        daemon=True,
    )
    load.start()
    data: dict[str, Any] = {}
    # Take snapshots while the load runs, until one window caught first tokens and decodes; how
    # long that takes depends on the machine, so the loop ends with the load, not on a clock.
    while load.is_alive():
        assert main(["snapshot", url, "--json", "--interval", "2"]) == 0
        data = json.loads(capsys.readouterr().out)
        if _under_load(data):
            break
    enough.set()
    load.join()
    assert _under_load(data), data
    for key in ("ttft_s", "itl_s"):
        assert data[key]["p50"] is not None and data[key]["p99"] is not None
        assert data[key]["p50"] <= data[key]["p99"]
        assert data[key]["buckets"]["p99"]["upper"] is None or (
            data[key]["buckets"]["p99"]["lower"] <= data[key]["p99"]
        )
    kv = data["kv"]
    # 64 MiB of fp32 KV at 2,048 bytes a token is 32,768 tokens: 256 blocks of 128.
    assert (kv["blocks_total"], kv["block_size_tokens"], kv["size_tokens"]) == (256, 128, 32768)
    assert kv["blocks_used"] == round(kv["usage_ratio"] * (kv["blocks_total"] - 1))
    assert kv["blocks_used"] + kv["blocks_free"] == kv["blocks_total"] - 1
    assert data["requests"]["running"] >= 1 and data["requests"]["waiting"] is not None
    assert data["throughput"]["prompt_tokens_per_s"] > 0
    assert data["replica"]["vllm_version"] and data["replica"]["healthy"] is True
    assert data["replica"]["served_models"] == ["tiny-llama"]
    assert data["missing"] == [] and data["unknown"] == []
    if not data["gpu"]["visible"]:
        assert data["gpu"]["reason"].startswith("no NVIDIA GPU visible")
    assert main(["snapshot", url]) == 0
    text = capsys.readouterr().out
    assert "TTFT" in text and ("GPU: none visible" in text or data["gpu"]["visible"])
