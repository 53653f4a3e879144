"""A real browser for tests: Debian's headless Chromium, driven over the DevTools protocol.

Chromium is started on a private profile with everything that would reach outside turned off
(background networking, component updates, sync); the tests talk to it over its DevTools
websocket with aiohttp, so nothing beyond the system's browser is needed. Each page records
every request it makes and every message its console shows.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

FLAGS = (
    "--headless",
    "--no-sandbox",  # tests run as root
    "--disable-gpu",
    "--enable-unsafe-swiftshader",  # WebGL in software: xterm.js draws with it
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
)
NAMES = ("chromium", "chromium-browser", "google-chrome")
START_TIMEOUT_S = 30.0

TERMINAL_HOOK = """
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true, enumerable: true});
    if (!window.__testTerminal && value && typeof value.write === "function") {
      window.__testTerminal = value;
    }
  },
});
const send = WebSocket.prototype.send;
WebSocket.prototype.send = function (data) {
  window.__testSocket = this;
  return send.call(this, data);
};
"""
"""Run before a page's own scripts: keeps the xterm.js terminal textual.js makes (it assigns it
to a `terminal` property, and the page exposes nothing), so a test reads the text it shows, and
the websocket the page sends on."""
HEARD_BACK = """new Promise(done => {
  const socket = window.__testSocket;
  const mark = `test-${Date.now()}-${Math.random()}`;
  socket.addEventListener("message", function heard(event) {
    if (typeof event.data === "string" && event.data.includes(mark)) {
      socket.removeEventListener("message", heard);
      done(true);
    }
  });
  socket.send(JSON.stringify(["ping", mark]));
})"""
TERMINAL_TEXT = """(() => {
  const terminal = window.__testTerminal;
  if (!terminal) return null;
  const buffer = terminal.buffer.active;
  const lines = [];
  for (let y = 0; y < terminal.rows; y++) {
    const line = buffer.getLine(buffer.viewportY + y);
    lines.push(line ? line.translateToString(true) : "");
  }
  return lines.join("\\n");
})()"""


def chromium_path() -> str | None:
    """The browser to test with: $SLOTOP_CHROMIUM, else the first of NAMES on PATH."""
    named = os.environ.get("SLOTOP_CHROMIUM")
    if named:
        return named
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def require_chromium() -> str:
    """The browser's path; skip the test without one, or fail it in CI (.ci/install-chromium)."""
    found = chromium_path()
    if found is not None:
        return found
    reason = "no Chromium (run .ci/install-chromium, or set SLOTOP_CHROMIUM)"
    if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


class Page:
    """One tab, spoken to over its DevTools websocket."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self._socket = socket
        self._calls = 0
        self._answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.requested: list[str] = []
        """Every URL the page asked for (documents, scripts, fonts, websockets), in order."""
        self.console: list[str] = []
        """Every console message and uncaught exception, as text."""
        self.statuses: dict[str, int] = {}
        """The HTTP status each URL the page loaded was answered with."""
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self._socket:
            if message.type is not aiohttp.WSMsgType.TEXT:
                continue
            said = json.loads(message.data)
            if "id" in said:
                future = self._answers.pop(said["id"], None)
                if future is not None and not future.done():
                    future.set_result(said)
            else:
                self._event(said.get("method", ""), said.get("params", {}))
        for future in self._answers.values():
            if not future.done():
                future.set_exception(ConnectionError("the browser's page went away"))

    def _event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requested.append(params["request"]["url"])
        elif method == "Network.responseReceived":
            self.statuses[params["response"]["url"]] = params["response"]["status"]
        elif method == "Network.webSocketCreated":
            self.requested.append(params["url"])
        elif method == "Runtime.consoleAPICalled":
            words = [str(a.get("value", a.get("description", ""))) for a in params["args"]]
            self.console.append(f"{params['type']}: {' '.join(words)}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            thrown = details.get("exception", {}).get("description", details.get("text"))
            self.console.append(f"exception: {thrown}")
        elif method == "Log.entryAdded":
            entry = params["entry"]
            self.console.append(f"{entry['level']}: {entry['text']}")

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result."""
        self._calls += 1
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._answers[self._calls] = future
        await self._socket.send_json({"id": self._calls, "method": method, "params": params})
        answer = await asyncio.wait_for(future, 30)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result

    async def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = await self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 60.0) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"the page never made {expression!r} true")
            await asyncio.sleep(0.25)

    async def open(self, url: str) -> None:
        """Go to `url` and wait for its load event."""
        await self.call("Page.navigate", url=url)
        await self.wait_for(
            f"location.href === {json.dumps(url)} && document.readyState === 'complete'"
        )

    async def watch_terminal(self) -> None:
        """From the next page on, keep the terminal textual.js makes, for `terminal_text`."""
        await self.call("Page.addScriptToEvaluateOnNewDocument", source=TERMINAL_HOOK)

    async def terminal_text(self) -> str:
        """The lines the page's terminal shows now (after `watch_terminal`), "" before it opens."""
        return str(await self.evaluate(TERMINAL_TEXT) or "")

    async def server_read_all(self) -> None:
        """Wait until the server has read all this page sent on its websocket so far: a ping
        sent now is answered (the server reads one socket's messages in order)."""
        await asyncio.wait_for(self.evaluate(HEARD_BACK), 30)

    async def focus_terminal(self) -> None:
        """Put the keyboard's focus in the terminal, as a click in it would."""
        await self.evaluate("window.__testTerminal.focus()")

    async def press(self, text: str) -> None:
        """Type `text` a key at a time, as a person at the keyboard would."""
        for character in text:
            for kind in ("keyDown", "keyUp"):
                await self.call(
                    "Input.dispatchKeyEvent",
                    type=kind,
                    key=character,
                    text=character if kind == "keyDown" else "",
                )

    async def screenshot(self, path: Path) -> int:
        """Save the page as PNG at `path`; its size in bytes."""
        shot = await self.call("Page.captureScreenshot", format="png")
        data = base64.b64decode(shot["data"])
        path.write_bytes(data)
        return len(data)

    async def close(self) -> None:
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self._socket.close()


class Chromium:
    """A headless Chromium of its own, with a fresh profile, for one test."""

    def __init__(self, width: int = 1600, height: int = 1000) -> None:
        self._size = (width, height)
        self._process: asyncio.subprocess.Process | None = None
        self._profile = Path(tempfile.mkdtemp(prefix="slotop-chromium-"))
        self._http: aiohttp.ClientSession | None = None
        self._devtools = ""
        self._pages: list[Page] = []
        self._drain: asyncio.Task[bytes] | None = None

    async def start(self) -> None:
        browser = require_chromium()
        width, height = self._size
        self._process = await asyncio.create_subprocess_exec(
            browser,
            *FLAGS,
            f"--user-data-dir={self._profile}",
            f"--window-size={width},{height}",
            "--remote-debugging-port=0",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        stderr = self._process.stderr
        assert stderr is not None
        said: list[str] = []

        async def listening() -> None:
            while line := (await stderr.readline()).decode(errors="replace"):
                said.append(line)
                if line.startswith("DevTools listening on "):
                    address = line.split()[-1]
                    self._devtools = address.split("/devtools/")[0].replace("ws://", "http://")
                    return

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(listening(), START_TIMEOUT_S)
        if not self._devtools:
            raise AssertionError(f"Chromium did not start:\n{''.join(said)}")
        self._drain = asyncio.create_task(stderr.read())  # a full pipe would stall it
        self._http = aiohttp.ClientSession()

    async def page(self, url: str | None = None) -> Page:
        """A new tab, recording its requests and console, at `url` when given."""
        assert self._http is not None
        async with self._http.put(f"{self._devtools}/json/new?about:blank") as answer:
            target = await answer.json()
        socket = await self._http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        page = Page(socket)
        self._pages.append(page)
        for domain in ("Page", "Runtime", "Network", "Log"):
            await page.call(f"{domain}.enable")
        width, height = self._size
        await page.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        if url is not None:
            await page.open(url)
        return page

    async def close(self) -> None:
        for page in self._pages:
            with contextlib.suppress(Exception):
                await page.close()
        if self._http is not None:
            await self._http.close()
        if self._process is not None and self._process.returncode is None:
            self._process.terminate()
            try:
                await asyncio.wait_for(self._process.wait(), 10)
            except asyncio.TimeoutError:
                self._process.kill()
                await self._process.wait()
        shutil.rmtree(self._profile, ignore_errors=True)


@contextlib.asynccontextmanager
async def chromium(width: int = 1600, height: int = 1000) -> AsyncIterator[Chromium]:
    """A started headless Chromium, closed (its profile removed) on leaving."""
    browser = Chromium(width, height)
    try:
        await browser.start()
        yield browser
    finally:
        await browser.close()
