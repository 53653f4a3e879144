"""The server of `slotop web` with a stand-in app: the token, the files, one hand on the dials.

The stand-in (tests/support/served_app.py) says in words what reached it, so each test reads
from a viewer's screen what the app was sent.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from slotop.web.errors import WebError
from slotop.web.server import WebServer
from slotop.web.shared import SharedApp

pytestmark = pytest.mark.anyio

STAND_IN = [sys.executable, str(Path(__file__).parents[1] / "support" / "served_app.py")]
TOKEN = "Sx4Qm0cK3nT9wLzA8pEb2g"


class Viewer:
    """One browser's websocket: the screen output and the page's messages it received."""

    def __init__(self, socket: aiohttp.ClientWebSocketResponse) -> None:
        self.socket = socket
        self.screen: list[bytes] = []
        self.told: list[dict[str, Any]] = []
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for message in self.socket:
            if message.type is aiohttp.WSMsgType.BINARY:
                self.screen.append(message.data)
            elif message.type is aiohttp.WSMsgType.TEXT:
                kind, body = json.loads(message.data)
                if kind == "slotop":
                    self.told.append(body)
        self.closed.set()

    async def shows(self, line: bytes, times: int = 1) -> None:
        """Wait until the app's output to this viewer holds `line` (so many times)."""
        for _ in range(500):
            if self.screen.count(line) >= times:
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"never shown {line!r}; shown {self.screen!r}")

    async def told_that(self, key: str) -> dict[str, Any]:
        """Wait until the page was told something with `key`; the latest such news."""
        for _ in range(500):
            found = [news for news in self.told if key in news]
            if found:
                return found[-1]
            await asyncio.sleep(0.01)
        raise AssertionError(f"never told {key!r}; told {self.told!r}")

    def send(self, *envelope: object) -> Any:
        return self.socket.send_str(json.dumps(list(envelope)))


@pytest.fixture
async def client() -> AsyncIterator[tuple[TestClient[Any, Any], SharedApp]]:
    shared = SharedApp(STAND_IN, lambda _: None, linger_s=0.3)
    server = WebServer(shared, title="slotop · test", token=TOKEN)
    async with TestClient(TestServer(server.application())) as test_client:
        yield test_client, shared
        await shared.close()


async def viewer(test_client: TestClient[Any, Any], width: int, height: int) -> Viewer:
    socket = await test_client.ws_connect(f"/{TOKEN}/ws?width={width}&height={height}")
    return Viewer(socket)


@pytest.mark.parametrize(
    "path", ["/", f"/{TOKEN[:-1]}/", "/wrong/ws", f"/{TOKEN}x/static/js/textual.js", "/favicon.ico"]
)
async def test_a_request_without_the_token_is_refused(
    client: tuple[TestClient[Any, Any], SharedApp], path: str
) -> None:
    test_client, _ = client
    answer = await test_client.get(path)
    assert answer.status == 403
    assert "needs the access token" in await answer.text()


async def test_a_websocket_without_the_token_is_refused(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, shared = client
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await test_client.ws_connect("/not-the-token/ws?width=80&height=24")
    assert refused.value.status == 403
    assert len(shared.room) == 0


async def test_the_page_and_its_files_come_from_here_and_nothing_else_is_served(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, _ = client
    page = await test_client.get(f"/{TOKEN}/")
    assert page.status == 200
    assert "default-src 'none'" in page.headers["Content-Security-Policy"]
    html = await page.text()
    assert "<title>slotop · test</title>" in html
    assert "http" not in html  # every file by a path of this server
    for path in (
        "static/js/textual.js",
        "static/css/xterm.css",
        "static/fonts/RobotoMono-VariableFont_wght.ttf",
        "page/web.js",
        "page/web.css",
    ):
        answer = await test_client.get(f"/{TOKEN}/{path}")
        assert answer.status == 200, path
    for path in ("static/images/background.png", "static/../server.py", "page/index.html"):
        assert (await test_client.get(f"/{TOKEN}/{path}")).status == 404, path
    assert (await test_client.get(f"/{TOKEN}", allow_redirects=False)).status == 302


@pytest.mark.slow
async def test_the_first_viewer_drives_the_app_and_a_second_only_watches(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, _ = client
    first = await viewer(test_client, 120, 40)
    await first.shows(b"size:120x40")
    assert (await first.told_that("holding"))["holding"] is True
    await first.send("stdin", "+")
    await first.shows(b"typed:+")

    second = await viewer(test_client, 150, 45)
    await second.shows(b"redraw")
    assert second.screen[0] == b"\x1b[?1049h\x1b[?1000h\x1b[?1006h\x1b[?25l"  # the app's modes
    news = await second.told_that("holder")
    assert news["holding"] is False
    assert news["holder"] == "viewer 1 (127.0.0.1)"
    assert news["since_ms"] is not None
    await second.send("stdin", "l")  # would turn the probe on, were it the holder's
    await second.send("focus")
    await first.send("stdin", "-")
    await first.shows(b"typed:-")
    assert b"typed:l" not in first.screen + second.screen
    assert b"focus" not in first.screen
    assert second.screen[-1] == b"typed:-"  # both see the same screen


@pytest.mark.slow
async def test_the_control_passes_when_released_and_a_watcher_asks(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, _ = client
    first = await viewer(test_client, 120, 40)
    await first.shows(b"size:120x40")
    second = await viewer(test_client, 120, 40)
    await second.shows(b"redraw")
    await first.send("slotop", "release")
    for _ in range(100):
        if second.told and second.told[-1]["holder"] is None:
            break
        await asyncio.sleep(0.01)
    assert second.told[-1]["holder"] is None
    await second.send("slotop", "take")
    await second.send("stdin", "+")
    await second.shows(b"typed:+")
    await first.send("slotop", "take")  # held: refused
    await first.send("stdin", "x")
    await second.send("stdin", "y")
    await second.shows(b"typed:y")
    assert b"typed:x" not in second.screen
    assert first.told[-1]["holder"] == "viewer 2 (127.0.0.1)"


@pytest.mark.slow
async def test_the_app_is_as_large_as_the_smallest_viewer(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, _ = client
    first = await viewer(test_client, 200, 60)
    await first.shows(b"size:200x60")
    second = await viewer(test_client, 120, 40)
    await second.shows(b"redraw")
    # The larger viewer's screen is cleared before the app draws itself smaller, then whole.
    shrunk = first.screen[first.screen.index(b"size:200x60") + 1 :]
    assert shrunk[:3] == [b"\x1b[H\x1b[2J", b"size:120x40", b"redraw"]
    await second.send("resize", {"width": 130, "height": 70})
    await first.shows(b"size:130x60")
    await second.socket.close()
    await first.shows(b"redraw", times=3)
    grown = first.screen[first.screen.index(b"size:130x60") :]
    assert grown == [b"size:130x60", b"redraw", b"size:200x60", b"redraw"]  # nothing cleared


@pytest.mark.slow
async def test_the_app_quits_once_nobody_has_watched_for_its_linger(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, shared = client
    first = await viewer(test_client, 100, 30)
    await first.shows(b"size:100x30")
    await first.socket.close()
    await asyncio.sleep(0.1)
    again = await viewer(test_client, 100, 30)  # a reload within the linger: the same app
    await again.shows(b"redraw")
    await again.socket.close()
    for _ in range(300):
        if shared._app is None:
            break
        await asyncio.sleep(0.01)
    assert shared._app is None
    later = await viewer(test_client, 100, 30)  # a fresh one for the next viewer
    await later.shows(b"size:100x30")
    assert b"redraw" not in later.screen


@pytest.mark.slow
async def test_every_viewer_is_told_when_the_app_ends_and_let_go(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, shared = client
    first = await viewer(test_client, 100, 30)
    await first.shows(b"size:100x30")
    second = await viewer(test_client, 100, 30)
    await second.shows(b"redraw")
    await first.send("stdin", "q")
    for watcher in (first, second):
        await asyncio.wait_for(watcher.closed.wait(), 5)
        assert watcher.told[-1] == {"ended": 0}
    assert len(shared.room) == 0


@pytest.mark.slow
async def test_closing_the_server_quits_the_app_and_hangs_up_on_viewers(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, shared = client
    first = await viewer(test_client, 100, 30)
    await first.shows(b"size:100x30")
    app = shared._app
    await shared.close()
    await asyncio.wait_for(first.closed.wait(), 5)
    assert app is not None and not app.running
    assert first.told[-1] == {"stopped": True}


async def test_a_websocket_opened_by_another_sites_page_is_refused(
    client: tuple[TestClient[Any, Any], SharedApp],
) -> None:
    test_client, shared = client
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await test_client.ws_connect(
            f"/{TOKEN}/ws?width=80&height=24", headers={"Origin": "http://example.com"}
        )
    assert refused.value.status == 403
    assert len(shared.room) == 0


@pytest.mark.slow
async def test_an_app_that_cannot_start_is_told_to_the_page_with_what_it_said() -> None:
    said: list[str] = []
    shared = SharedApp([*STAND_IN, "fail"], said.append)
    server = WebServer(shared, title="t", token=TOKEN)
    async with TestClient(TestServer(server.application())) as test_client:
        first = await viewer(test_client, 100, 30)
        news = await first.told_that("error")
        await asyncio.wait_for(first.closed.wait(), 5)
    assert "did not start" in news["error"]
    assert "exit code 3" in news["error"]
    assert "the settings file says no" in news["error"]
    assert any("the settings file says no" in line for line in said)


async def test_a_port_in_use_is_refused_in_words() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = WebServer(SharedApp(STAND_IN, print), title="t", port=port)
        with pytest.raises(WebError) as refused:
            await server.start()
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert "in use" in str(refused.value)
    assert "--port" in str(refused.value)


async def test_the_address_carries_the_port_listened_on_and_the_token() -> None:
    server = WebServer(SharedApp(STAND_IN, print), title="t", port=0)
    await server.start()
    try:
        assert server.port > 0
        assert server.address() == f"http://127.0.0.1:{server.port}/{server.token}/"
        assert len(server.token) >= 22
        other = WebServer(SharedApp(STAND_IN, print), title="t", port=0)
        assert other.token != server.token
    finally:
        await server.close()
