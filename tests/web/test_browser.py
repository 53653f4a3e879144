"""`slotop web --demo` in a real browser: Debian's headless Chromium opens the page and reads
what its terminal shows.

Every pane shows numbers (a screenshot is kept in the test artefacts, its size checked, not its
pixels), every file the page loads comes from the server, `+` typed in the page moves the probe's
concurrency, a second browser is read-only and says who holds the control, and a wrong token is
refused. Stopping the server ends the dashboard and the demo's replica with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.browser import Page, chromium, require_chromium
from tests.support.paths import ARTEFACTS
from tests.support.vllm_replica import live_descendants, still_alive

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

PANES_WITH_NUMBERS = {
    "header": r"fresh .*\n.*SIMULATED replica .* [\d,]+ blocks",
    "SLO": r"TTFT p99 +< 500 ms +[\d.]+ ms +[\d.]+ ms",
    "probe": r"load ON +concurrency \d+.*\n.*in flight \d+ +done \d+",
    "throughput": r"gen [\d,.]+ tok/s",
    "KV cache": r"[\d,]+ / [\d,]+ blocks [\d.]+%",
    "latency": r"p99 .*[▁▂▃▄▅▆▇█]+ [\d.]+ ms",
    "curve": r"Curve #1 .*\n.*TTFT p99 ms(.*\n){0,3}.* \d+┤",
    "litmus": r"seqs that fit at max context: [\d.]+",
    "GPU": r"GPU0 \d+% util",
    "events": r"\d\d:\d\d:\d\d load +Keep \d+ request",
}
"""A pattern per pane that only its numbers match, read off the browser's terminal."""
SCREENSHOT_MIN_BYTES = 60_000
"""The page before the dashboard draws (its bar, an empty terminal) is about 8 KB as PNG at
1600×1000; with every pane drawn, about 150 KB."""
WINDOW = (1600, 1000)
FONT_PX = 14  # 160×50 cells and more fit the window: every pane on screen, side by side


@dataclass(frozen=True)
class Served:
    """`slotop web --demo` running: its address, origin and what it has said."""

    address: str
    origin: str
    process: subprocess.Popen[str]
    said: list[str]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    require_chromium()
    folder = tmp_path_factory.mktemp("web")
    environ = {**os.environ, "XDG_CONFIG_HOME": str(folder / "config")}
    environ.pop("SLOTOP_CONFIG", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "slotop", "web", "--demo", "--port", "0", "--no-record"],
        cwd=folder,  # empty: no slotop.toml, nothing that shadows the package
        env=environ,
        stderr=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    found = threading.Event()

    def listen() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line)
            if re.search(r"http://127\.0\.0\.1:\d+/\S+/", line):
                found.set()

    threading.Thread(target=listen, daemon=True).start()
    try:
        assert found.wait(60), f"slotop web printed no address:\n{''.join(said)}"
        address = next(m.group() for line in said if (m := re.search(r"http://\S+/\S+/", line)))
        origin = address.split("/", 3)
        yield Served(address, f"{origin[0]}//{origin[2]}", process, said)
    finally:
        family = live_descendants(process.pid)
        process.send_signal(signal.SIGINT)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            pytest.fail(f"slotop web did not stop on SIGINT:\n{''.join(said)}")
        for _ in range(100):
            if not still_alive(family):
                break
            time.sleep(0.1)
        assert not still_alive(family), "the dashboard or the demo's replica outlived slotop web"
        assert process.returncode == 0, "".join(said)


async def dashboard(page: Page, served: Served) -> str:
    """Open the dashboard in `page` and wait until every pane shows numbers; its text."""
    await page.watch_terminal()
    await page.open(f"{served.address}?fontsize={FONT_PX}")
    deadline = time.monotonic() + 120
    while True:
        text = await page.terminal_text()
        missing = [name for name, shown in PANES_WITH_NUMBERS.items() if not re.search(shown, text)]
        if not missing:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"panes without numbers: {missing}; the page shows:\n{text}")
        await page.evaluate("new Promise(done => setTimeout(done, 500))")


def concurrency(text: str) -> int:
    found = re.search(r"load ON +concurrency (\d+)", text)
    assert found, text
    return int(found.group(1))


async def shows(page: Page, pattern: str, timeout_s: float = 60) -> str:
    """Wait until the page's terminal shows `pattern`; its text then."""
    deadline = time.monotonic() + timeout_s
    while not re.search(pattern, text := await page.terminal_text()):
        if time.monotonic() > deadline:
            raise AssertionError(f"never shown {pattern!r}; the page shows:\n{text}")
        await page.evaluate("new Promise(done => setTimeout(done, 250))")
    return text


async def bar_says(page: Page, words: str, timeout_s: float = 60) -> None:
    """Wait until the page's control bar says `words`."""
    deadline = time.monotonic() + timeout_s
    while words not in (
        bar := await page.evaluate("document.getElementById('control-text').textContent")
    ):
        if time.monotonic() > deadline:
            raise AssertionError(f"the control bar never said {words!r}; it says {bar!r}")
        await page.evaluate("new Promise(done => setTimeout(done, 100))")


def kept(name: str, size: int) -> None:
    assert size > SCREENSHOT_MIN_BYTES, f"{ARTEFACTS / name} is {size} bytes: nothing drawn?"


async def test_every_pane_shows_numbers_and_nothing_comes_from_outside(served: Served) -> None:
    async with chromium(*WINDOW) as browser:
        page = await browser.page()
        await dashboard(page, served)
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        kept("web-dashboard.png", await page.screenshot(ARTEFACTS / "web-dashboard.png"))
        assert await page.evaluate(f"document.fonts.check('{FONT_PX}px \"Roboto Mono\"')")
        bar = await page.evaluate("document.getElementById('control-text').textContent")
    assert "hold the control since" in bar
    assert page.requested, "the page loaded nothing?"
    from_elsewhere = [
        url
        for url in page.requested
        if not url.startswith((served.origin + "/", served.origin.replace("http", "ws", 1)))
    ]
    assert not from_elsewhere
    assert any(url.endswith(".ttf") for url in page.requested), "the font came from nowhere"
    refused = [line for line in page.console if "Refused" in line or "exception" in line]
    assert not refused


async def test_a_key_typed_in_the_page_moves_the_probes_concurrency(served: Served) -> None:
    async with chromium(*WINDOW) as browser:
        page = await browser.page()
        before = concurrency(await dashboard(page, served))
        await page.focus_terminal()
        await page.press("+")
        text = await shows(page, rf"load ON +concurrency {before + 1}\b")
        assert f"Concurrency → {before + 1}" in text
        await page.press("-")
        await shows(page, rf"load ON +concurrency {before}\b")


async def test_a_second_browser_is_read_only_and_says_who_holds_the_control(
    served: Served,
) -> None:
    async with chromium(*WINDOW) as first_browser, chromium(*WINDOW) as second_browser:
        holder = await first_browser.page()
        before = concurrency(await dashboard(holder, served))
        watcher = await second_browser.page()
        await dashboard(watcher, served)  # joined late, it was sent the whole screen
        bar = await watcher.evaluate("document.getElementById('control-text').textContent")
        assert re.search(r"Read-only: viewer \d+ \(127\.0\.0\.1\) holds the control since \d", bar)
        ARTEFACTS.mkdir(parents=True, exist_ok=True)
        kept("web-watcher.png", await watcher.screenshot(ARTEFACTS / "web-watcher.png"))

        await watcher.focus_terminal()
        await watcher.press("++l")  # would step the load up twice, then stop it, were it holding
        await watcher.server_read_all()
        await holder.focus_terminal()
        await holder.press("-")
        # Had the watcher's keys reached the dashboard, it would stand at before + 1.
        text = await shows(watcher, rf"load ON +concurrency {before - 1}\b")
        assert "Stop the load" not in text
        assert len(_dashboards(served)) == 1, "one dashboard, one probe, whoever watches"

        await holder.evaluate("document.getElementById('release').click()")
        # The watcher's page asks for the control with its key only once it has heard that the
        # control is free; a key pressed before that news arrives is (rightly) only flashed at.
        await bar_says(watcher, "nobody holds the control")
        await watcher.press("+")  # the control is free: the watcher's key takes it
        await shows(holder, rf"load ON +concurrency {before}\b")
        bar = await holder.evaluate("document.getElementById('control-text').textContent")
        assert "Read-only" in bar


async def test_a_wrong_token_is_refused(served: Served) -> None:
    async with chromium(*WINDOW) as browser:
        page = await browser.page()
        wrong = f"{served.origin}/not-the-token/"
        await page.open(wrong)
        body = await page.evaluate("document.body.innerText")
        opened = await page.evaluate(
            "new Promise(done => { const s = new WebSocket("
            f"'{wrong.replace('http', 'ws', 1)}ws?width=80&height=24');"
            "s.onopen = () => done('opened'); s.onerror = () => done('refused'); })"
        )
    assert page.statuses[wrong] == 403
    assert "needs the access token" in body
    assert opened == "refused"


def _dashboards(served: Served) -> list[int]:
    """The processes under the server that run a dashboard (`slotop demo`)."""
    found = []
    for pid in live_descendants(served.process.pid):
        with contextlib.suppress(OSError):
            words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if words[1:4] == [b"-m", b"slotop", b"demo"]:
                found.append(pid)
    return found
