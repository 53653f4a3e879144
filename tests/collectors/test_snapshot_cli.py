"""`slotop snapshot`: saved dumps, a live HTTP replica serving captures, and exit codes."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from slotop.cli import main
from tests.support.paths import CAPTURES
from tests.support.vllm_replica import free_port

HANDMADE = Path(__file__).resolve().parent / "data"


@pytest.fixture(autouse=True)
def _no_settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("SLOTOP_CONFIG", raising=False)


def test_metrics_file_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["snapshot", "--metrics-file", str(CAPTURES / "vllm-0.32-cpu-queue.txt"), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["requests"]["waiting"] == 12.0
    assert data["kv"]["blocks_used"] == 12 and data["kv"]["blocks_total"] == 256
    assert data["ttft_s"]["count"] == 8.0 and data["ttft_s"]["p99"] is not None
    assert data["gpu"] is None and data["source"] == "metrics-file"
    slo = data["ttft_s"]["slo"]  # the default settings' target, judged by the bucket alone
    assert slo["percentile"] == 99.0 and slo["target"] == 0.5
    assert slo["verdict"] in {"pass", "breach", "undecided"} and slo["bucket"] is not None


def test_metrics_file_as_table(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["snapshot", "--metrics-file", str(HANDMADE / "vllm-0.6-v0-handmade.txt")])
    out = capsys.readouterr().out
    assert code == 0
    assert "v0 engine" in out and "missing: " in out


@pytest.mark.parametrize(
    ("content", "words"),
    [
        pytest.param("<html><body>502 Bad Gateway</body></html>\n", "line 1", id="html"),
        pytest.param("# only a comment\n", "no vllm: or sglang: metric", id="no vllm metric"),
        pytest.param("process_open_fds 3\n", "no vllm: or sglang: metric", id="another exporter"),
        pytest.param(
            "process_start_time_seconds 1.7e9\n",
            "no vllm: or sglang: metric",
            id="only a process start",
        ),
        pytest.param('vllm:x{engine="0" 1\n', "line 1", id="truncated line"),
    ],
)
def test_garbage_file_exits_2_with_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, words: str
) -> None:
    dump = tmp_path / "dump.txt"
    dump.write_text(content, encoding="utf-8")
    assert main(["snapshot", "--metrics-file", str(dump)]) == 2
    assert words in capsys.readouterr().err


def test_missing_file_and_url_with_file_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["snapshot", "--metrics-file", str(tmp_path / "nope.txt")]) == 2
    assert "cannot read" in capsys.readouterr().err
    dump = str(CAPTURES / "vllm-0.32-cpu-idle.txt")
    assert main(["snapshot", "http://127.0.0.1:9", "--metrics-file", dump]) == 2
    assert "not both" in capsys.readouterr().err


def test_unreachable_replica_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["snapshot", f"http://127.0.0.1:{free_port()}", "--interval", "0.01"]) == 1
    assert "cannot connect" in capsys.readouterr().err


class _CapturedReplica(BaseHTTPRequestHandler):
    """Serves /metrics from a list of captured bodies, one per request, and the JSON captures."""

    bodies: ClassVar[list[bytes]] = []

    def do_GET(self) -> None:
        if self.path == "/metrics":
            body = self.bodies.pop(0) if len(self.bodies) > 1 else self.bodies[0]
        elif self.path == "/version":
            body = (CAPTURES / "vllm-0.32-cpu-version.json").read_bytes()
        elif self.path == "/v1/models":
            body = (CAPTURES / "vllm-0.32-cpu-models.json").read_bytes()
        elif self.path == "/health":
            body = b""
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def captured_replica() -> Iterator[str]:
    _CapturedReplica.bodies = [
        (CAPTURES / "vllm-0.32-cpu-load.txt").read_bytes(),
        (CAPTURES / "vllm-0.32-cpu-restart-a.txt").read_bytes(),
    ]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _CapturedReplica)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_live_snapshot_over_http(captured_replica: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["snapshot", captured_replica, "--json", "--interval", "0.05"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0
    assert data["source"] == "live"
    assert data["replica"]["vllm_version"] == "0.32.0"
    assert data["replica"]["served_models"] == ["tiny-llama"]
    assert data["replica"]["healthy"] is True
    assert data["window"]["covered_s"] > 0 and data["window"]["since_start"] is False
    # Between the load and restart-a captures the replica finished 24 requests.
    assert data["totals"]["requests_finished"] == 24.0
    assert data["throughput"]["generation_tokens_per_s"] > 0
    assert data["ttft_s"]["count"] == 16.0
    assert data["gpu"]["visible"] in (True, False)
