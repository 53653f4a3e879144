"""The web server of `slotop web`: an address with a secret in it, the page, its files, and the
websocket through which every browser watches the one shared app.

Every request must start with the access token (`/TOKEN/…`); any other is refused with 403, the
websocket included, and a websocket opened from another site's page is refused too. The token is
random, made anew each time the server starts, and compared in constant time.
"""

from __future__ import annotations

import errno
import hmac
import html
import secrets
import socket
from pathlib import Path
from string import Template
from typing import Final
from urllib.parse import urlsplit

from aiohttp import WSMsgType, web
from aiohttp.typedefs import Handler

from slotop.web.assets import (
    INDEX_FILE,
    PAGE_FILES,
    PAGE_FOLDER,
    TEXTUAL_SERVE_FILES,
    textual_serve_static,
)
from slotop.web.errors import WebError
from slotop.web.shared import SharedApp

TOKEN_BYTES = 16
"""Random bytes in the access token (128 bits, 22 URL-safe characters)."""
HEARTBEAT_S = 15.0
"""How often a browser's websocket is pinged; one that does not answer is let go (its control
with it)."""
MAX_MESSAGE_BYTES = 1 << 16
NAME_CHARACTERS = 40
SECURITY_HEADERS: Final = {
    # Nothing from another origin: no font service, no script host, no frame around the page.
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; "
    "style-src 'self' 'unsafe-inline'; font-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
REFUSED = "slotop web: this address needs the access token; open the address slotop web printed.\n"


class WebServer:
    """Serves one shared app at http://HOST:PORT/TOKEN/."""

    def __init__(
        self,
        shared: SharedApp,
        *,
        title: str,
        host: str = "127.0.0.1",
        port: int = 0,
        token: str | None = None,
    ) -> None:
        self._shared = shared
        self.host = host
        self._port = port
        self.token = token or secrets.token_urlsafe(TOKEN_BYTES)
        self._static = textual_serve_static()
        self._index = Template(INDEX_FILE.read_text()).substitute(title=html.escape(title))
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The port listened on (the one the system chose, for port 0)."""
        if self._runner is not None and self._runner.addresses:
            return int(self._runner.addresses[0][1])
        return self._port

    def address(self) -> str:
        """The page's address, token included; an unspecified host shows as this machine's name."""
        host = self.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        elif ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}/{self.token}/"

    def application(self) -> web.Application:
        """The aiohttp application: the token check, then the page, its files and the websocket."""
        app = web.Application(middlewares=[self._guard])
        base = f"/{self.token}"
        app.router.add_get(base, self._to_page)
        app.router.add_get(f"{base}/", self._page)
        app.router.add_get(f"{base}/ws", self._websocket)
        app.router.add_get(base + "/static/{name:.+}", self._textual_serve_file)
        app.router.add_get(base + "/page/{name}", self._page_file)
        return app

    async def start(self) -> None:
        """Listen; a port in use, a port not allowed or an address not here is a WebError."""
        runner = web.AppRunner(self.application(), access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self._port).start()
        except OSError as exc:
            await runner.cleanup()
            raise WebError(self._why_not(exc)) from None
        self._runner = runner

    def _why_not(self, exc: OSError) -> str:
        where = f"{self.host}:{self._port}"
        if exc.errno == errno.EADDRINUSE:
            return (
                f"cannot listen on {where}: the port is in use (another slotop web, or another "
                "server); pick another with --port N, or --port 0 for any free one"
            )
        if exc.errno == errno.EACCES:
            return f"cannot listen on {where}: ports under 1024 need privileges; pick another"
        if exc.errno == errno.EADDRNOTAVAIL or isinstance(exc, socket.gaierror):
            return (
                f"cannot listen on {where}: this machine has no address {self.host!r}; "
                "127.0.0.1 is this machine alone, 0.0.0.0 every network it is on"
            )
        return f"cannot listen on {where}: {exc.strerror or exc}"

    async def close(self) -> None:
        """Stop listening and close every connection."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        first = request.path.lstrip("/").partition("/")[0]
        if not hmac.compare_digest(first.encode(), self.token.encode()):
            return web.Response(status=403, text=REFUSED, headers=SECURITY_HEADERS)
        response = await handler(request)
        if not response.prepared:  # a websocket has sent its headers already
            response.headers.update(SECURITY_HEADERS)
        return response

    async def _to_page(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(f"/{self.token}/")

    async def _page(self, request: web.Request) -> web.StreamResponse:
        return web.Response(text=self._index, content_type="text/html")

    async def _textual_serve_file(self, request: web.Request) -> web.StreamResponse:
        return self._file(self._static, TEXTUAL_SERVE_FILES, request.match_info["name"])

    async def _page_file(self, request: web.Request) -> web.StreamResponse:
        return self._file(PAGE_FOLDER, PAGE_FILES, request.match_info["name"])

    @staticmethod
    def _file(folder: Path, served: dict[str, str], name: str) -> web.StreamResponse:
        if name not in served:
            raise web.HTTPNotFound()
        return web.FileResponse(folder / name, headers={"Content-Type": served[name]})

    async def _websocket(self, request: web.Request) -> web.StreamResponse:
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            return web.Response(status=403, text="slotop web: a page of another site\n")
        socket_ = web.WebSocketResponse(heartbeat=HEARTBEAT_S, max_msg_size=MAX_MESSAGE_BYTES)
        await socket_.prepare(request)
        viewer = await self._shared.join(
            socket_,
            request.remote or "unknown",
            _name(request.query.get("name")),
            _cells(request.query.get("width"), 80),
            _cells(request.query.get("height"), 24),
        )
        if viewer is None:
            return socket_
        try:
            async for message in socket_:
                if message.type is WSMsgType.TEXT:
                    self._shared.received(viewer.number, message.data)
        finally:
            await self._shared.leave(viewer.number)
        return socket_


def _cells(text: str | None, default: int) -> int:
    try:
        return int(text) if text is not None else default
    except ValueError:
        return default


def _name(text: str | None) -> str | None:
    """A name a viewer gave itself (?name=), printable and short, or None."""
    if not text:
        return None
    kept = "".join(c for c in text if c.isprintable()).strip()[:NAME_CHARACTERS]
    return kept or None
