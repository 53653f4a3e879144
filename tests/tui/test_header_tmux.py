"""The dashboard's header in a real terminal (tmux) at 80 and 60 columns: two lines that never wrap.

`slotop attach` to the simulated replica. Each line's items are worked from the replica's own
answers (/v1/models, /version, the cache_config_info series) and the header's rule: items are
two cells apart, and while a line is too long the least important item goes first (attached,
then the block size, the block count, the KV dtype, the uptime; on the first line the vLLM
version, then the model), while the freshness and the URL stay, cut with an ellipsis if need be.
An 80-column terminal leaves the header 78 cells (one of padding each side), 60 columns 58.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.sim_replica import run_sim
from tests.support.tmux import Terminal

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

UPTIME = r"up (<1m|\d+m)"
"""The replica's uptime, as the header words it in its first hour."""


def _header(screen: str) -> tuple[str, str]:
    rows = screen.splitlines()
    return rows[0].strip(), rows[1].strip()


def _replica_says(url: str) -> dict[str, str]:
    """The model, version and cache shape, asked of the replica itself."""
    model = httpx.get(f"{url}/v1/models", timeout=5).json()["data"][0]["id"]
    version = httpx.get(f"{url}/version", timeout=5).json()["version"]
    metrics = httpx.get(f"{url}/metrics", timeout=5).text
    info = next(line for line in metrics.splitlines() if line.startswith("vllm:cache_config_info"))
    labels = dict(re.findall(r'(\w+)="([^"]*)"', info))
    return {
        "model": model,
        "version": version,
        "dtype": labels["cache_dtype"],
        "block": labels["block_size"],
        "blocks": f"{int(labels['num_gpu_blocks']):,}",
    }


def test_the_header_stays_two_lines_at_80_and_60_columns_and_when_stale(tmp_path: Path) -> None:
    with contextlib.ExitStack() as replica:
        url = replica.enter_context(contextlib.contextmanager(run_sim)())
        said = _replica_says(url)
        command = (
            f"unset COLUMNS LINES; cd {tmp_path} && {sys.executable} -m slotop attach {url}; "
            "echo SLOTOP-EXITED-$?; sleep 120"
        )
        term = Terminal(command, 80, 24)
        try:
            first = f"fresh  {said['model']}  vLLM {said['version']}"
            kv = f"KV {said['dtype']}"
            block, blocks = f"block {said['block']} tok", f"{said['blocks']} blocks"
            # 80 columns: the first line is whole; the second is 78 cells or fewer without
            # "  attached <1m" (14 cells) and more with it, so only attached goes.
            whole = f"{url}  {kv}  {block}  {blocks}  up <1m"
            assert len(first) <= 78 and len(whole) <= 78 < len(whole) + len("  attached <1m")
            second = re.compile(rf"{re.escape(f'{url}  {kv}  {block}  {blocks}')}  {UPTIME}")
            screen = term.wait_for(lambda s: _header(s)[0] == first)
            assert second.fullmatch(_header(screen)[1]), screen

            # 60 columns: 58 cells; without attached the line is still longer, and without the
            # block size (14 cells) it fits, so both go and the block count stays.
            assert len(whole) - len(f"  {block}") <= 58 < len(whole)
            term.resize(60, 24)
            narrower = re.compile(rf"{re.escape(f'{url}  {kv}  {blocks}')}  {UPTIME}")
            screen = term.wait_for(lambda s: narrower.fullmatch(_header(s)[1]) is not None)
            assert _header(screen)[0] == first

            # The replica stops. The reason begins with the URL and names the error after it,
            # so it is longer than the line: the model and version go and the reason is cut.
            # The second line stays as it was, so the first did not wrap into it.
            term.resize(80, 24)
            term.wait_for(lambda s: second.fullmatch(_header(s)[1]) is not None)
            replica.close()
            # (A scrape cut off as the replica ends may first say so; the next is refused.)
            refused = f"STALE: cannot connect to {url}/metrics"
            screen = term.wait_for(lambda s: _header(s)[0].startswith(refused))
            stale, still = _header(screen)
            assert stale.endswith("…") and len(stale) in (77, 78), screen  # 77: cut on a space
            assert said["model"] not in stale and "vLLM" not in stale
            assert second.fullmatch(still), screen
            for row in screen.splitlines():
                assert len(row) <= 80
            term.keys("q")
            term.wait_for(lambda s: "SLOTOP-EXITED-0" in s)
        finally:
            term.close()
