"""The real vLLM CPU replica the other tests rely on: it starts, answers, streams, stops."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.vllm_replica import (
    MIB,
    SERVED_MODEL_NAME,
    ReplicaError,
    ReplicaFlags,
    VllmReplica,
    build_tiny_model,
    drive_load,
    live_descendants,
    prompt_token_ids,
    still_alive,
    stream_completion,
)


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Return every sample called name in a scrape, keyed by its sorted labels."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                found[tuple(sorted(sample.labels.items()))] = sample.value
    return found


def total(text: str, name: str) -> float:
    """Return the sum of every sample called name in a scrape."""
    return sum(samples(text, name).values())


def cache_config(text: str) -> dict[str, str]:
    """Return the labels of the scrape's single vllm:cache_config_info sample."""
    (labels,) = samples(text, "vllm:cache_config_info")
    return dict(labels)


def scrape(replica: VllmReplica) -> str:
    """Return one /metrics body."""
    response = httpx.get(f"{replica.url}/metrics", timeout=10.0)
    response.raise_for_status()
    return response.text


@pytest.fixture(scope="module")
def scratch_replica(tiny_model_dir: Path, replica_log_dir: Path) -> Iterator[VllmReplica]:
    """A second replica, which a test stops; stopped after the module in any case."""
    replica = VllmReplica(tiny_model_dir, replica_log_dir / "scratch-replica.log")
    try:
        yield replica
    finally:
        replica.stop()


def test_flags_become_vllm_arguments() -> None:
    flags = ReplicaFlags(
        kv_cache_memory_bytes=2 * MIB, kv_cache_dtype="fp8", max_num_seqs=4, block_size=32
    )
    assert flags.to_args() == [
        "--kv-cache-memory-bytes=2097152",
        "--kv-cache-dtype=fp8",
        "--max-model-len=1024",
        "--max-num-seqs=4",
        "--block-size=32",
    ]


def test_prompts_are_deterministic_and_distinct() -> None:
    first = prompt_token_ids(0, 64)
    assert first == prompt_token_ids(0, 64)
    assert first != prompt_token_ids(1, 64)
    assert len(first) == 64
    assert all(3 <= token < 828 for token in first)


@pytest.mark.vllm
def test_tiny_model_is_byte_identical_each_run(tmp_path: Path) -> None:
    first = build_tiny_model(tmp_path / "a")
    second = build_tiny_model(tmp_path / "b")
    names = sorted(path.name for path in first.iterdir())
    assert names == [
        "config.json",
        "generation_config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@pytest.mark.vllm
def test_endpoints_answer(vllm_replica: VllmReplica) -> None:
    with httpx.Client(base_url=vllm_replica.url, timeout=10.0) as client:
        assert client.get("/health").status_code == 200
        assert client.get("/version").json()["version"] == "0.32.0"
        (model,) = client.get("/v1/models").json()["data"]
        assert model["id"] == SERVED_MODEL_NAME
        assert model["max_model_len"] == 1024
    text = scrape(vllm_replica)
    assert samples(text, "vllm:num_requests_running")
    config = cache_config(text)
    assert config["cache_dtype"] == "auto"
    assert config["kv_cache_memory_bytes"] == str(64 * MIB)
    assert config["num_gpu_blocks"] == "256"  # fp32: 64 MiB / (512 x 4 B) / 128 tokens


@pytest.mark.vllm
def test_streaming_completion_returns_chunks(vllm_replica: VllmReplica) -> None:
    with httpx.Client(timeout=60.0) as client:
        record = stream_completion(client, vllm_replica.url, prompt_token_ids(0, 32), 16)
        again = stream_completion(client, vllm_replica.url, prompt_token_ids(0, 32), 16)
    assert record.error is None
    assert record.completion_tokens == 16
    assert record.ttft_s is not None
    assert record.chunk_count >= 2
    assert record.text
    assert again.text == record.text  # dummy weights and temperature 0: same prompt, same text


@pytest.mark.vllm
def test_load_moves_the_counters(vllm_replica: VllmReplica) -> None:
    before = scrape(vllm_replica)
    result = drive_load(
        vllm_replica.url, concurrency=4, requests=8, max_tokens=32, prompt_tokens=64
    )
    after = scrape(vllm_replica)
    assert result.errors == []
    assert all(record.completion_tokens == 32 for record in result.records)
    finished = "vllm:request_success_total"
    assert total(after, finished) - total(before, finished) == 8
    generated = "vllm:generation_tokens_total"
    assert total(after, generated) - total(before, generated) == 8 * 32
    ttft = "vllm:time_to_first_token_seconds_count"
    assert total(after, ttft) - total(before, ttft) == 8


def fake_python(folder: Path, body: str) -> Path:
    """Write an executable shell script that stands in for the vLLM Python."""
    script = folder / "fake-python"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_a_replica_that_dies_at_start_raises_with_its_log(tmp_path: Path) -> None:
    python = fake_python(
        tmp_path, 'echo "error: argument --kv-cache-dtype: invalid choice"; exit 3'
    )
    replica = VllmReplica(tmp_path, tmp_path / "replica.log", python=python)
    with pytest.raises(ReplicaError, match="exited with 3") as caught:
        replica.start()
    assert "invalid choice" in str(caught.value)
    assert not replica.running


@pytest.mark.slow
def test_a_replica_that_never_answers_is_killed_with_its_children(tmp_path: Path) -> None:
    child_pid_file = tmp_path / "child.pid"
    python = fake_python(
        tmp_path, f'echo "starting"; sleep 300 & echo $! > {child_pid_file}; sleep 300'
    )
    replica = VllmReplica(
        tmp_path, tmp_path / "replica.log", python=python, startup_timeout_s=1.0, stop_grace_s=2.0
    )
    with pytest.raises(ReplicaError, match="not healthy after 1 s") as caught:
        replica.start()
    assert "starting" in str(caught.value)
    assert still_alive([int(child_pid_file.read_text())]) == []


@pytest.mark.vllm
def test_stop_leaves_no_process(scratch_replica: VllmReplica) -> None:
    if not scratch_replica.running:
        scratch_replica.start()
    assert scratch_replica.pid is not None
    processes = live_descendants(scratch_replica.pid)
    assert len(processes) >= 2  # the API server and its engine core
    scratch_replica.stop()
    assert not scratch_replica.running
    assert still_alive(processes) == []
    scratch_replica.stop()  # stopping twice is harmless
