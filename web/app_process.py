"""The dashboard as a child process under Textual's web driver, spoken to through its pipes.

The server starts the app's own command (`slotop attach URL`, `slotop demo`) with Textual told to
drive a web client: its screen arrives on stdout as packets, and keys, size and instructions go
to its stdin. Its stderr is passed on line by line; the last lines say why when it fails to start.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
from collections.abc import Callable, Sequence

from slotop.web.errors import WebError
from slotop.web.protocol import (
    DATA,
    HEADER_BYTES,
    META,
    READY_LINE,
    REDRAW_META,
    meta_packet,
    packet,
    payload_length,
)

WEB_DRIVER = "textual.drivers.web_driver:WebDriver"
STDERR_KEPT = 20
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 15.0
"""How long a quit may take (the demo stops its replica) before the process is terminated."""


class AppProcess:
    """One run of the app: started once, fed keys and sizes, stopped once."""

    def __init__(
        self,
        argv: Sequence[str],
        output: Callable[[bytes], None],
        log: Callable[[str], None],
    ) -> None:
        self._argv = list(argv)
        self._output = output
        self._log = log
        self._process: asyncio.subprocess.Process | None = None
        self._readers: list[asyncio.Task[None]] = []
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_KEPT)

    @property
    def running(self) -> bool:
        """Whether the app started and has not ended."""
        return self._process is not None and self._process.returncode is None

    async def start(self, columns: int, rows: int) -> None:
        """Start the app at this size and wait until it speaks the protocol."""
        environ = {
            **os.environ,
            "TEXTUAL_DRIVER": WEB_DRIVER,
            "TEXTUAL_COLOR_SYSTEM": "truecolor",
            "COLUMNS": str(columns),
            "ROWS": str(rows),
        }
        try:
            process = self._process = await asyncio.create_subprocess_exec(
                *self._argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=environ,
            )
        except OSError as exc:
            raise WebError(f"cannot start the dashboard ({self._argv[0]}): {exc}") from None
        assert process.stdout is not None and process.stderr is not None
        self._readers.append(asyncio.create_task(self._pass_stderr(process.stderr)))
        try:
            await asyncio.wait_for(self._until_ready(process.stdout), START_TIMEOUT_S)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, EOFError):
            code = await self.stop()
            said = "\n".join(self._stderr) or "(it wrote nothing to stderr)"
            raise WebError(
                f"the dashboard did not start (`{' '.join(self._argv[1:])}` ended with exit "
                f"code {code}); it said:\n{said}"
            ) from None
        self._readers.append(asyncio.create_task(self._pass_screen(process.stdout)))

    async def _until_ready(self, stdout: asyncio.StreamReader) -> None:
        while (line := await stdout.readline()) != READY_LINE:
            if not line:
                raise EOFError
            self._log(line.decode(errors="replace").rstrip())

    async def _pass_screen(self, stdout: asyncio.StreamReader) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                header = await stdout.readexactly(HEADER_BYTES)
                payload = await stdout.readexactly(payload_length(header))
                if header[:1] == DATA:
                    self._output(payload)
                elif header[:1] == META and json.loads(payload).get("type") == "exit":
                    return  # the app leaves application mode: nothing more to draw

    async def _pass_stderr(self, stderr: asyncio.StreamReader) -> None:
        while line := await stderr.readline():
            text = line.decode(errors="replace").rstrip()
            self._stderr.append(text)
            self._log(text)

    def keys(self, text: str) -> None:
        """Type into the app."""
        self._send(packet(DATA, text.encode()))

    def resize(self, columns: int, rows: int) -> None:
        """Lay the app out for a screen of this size."""
        self._send(meta_packet("resize", width=columns, height=rows))

    def focus(self, focused: bool) -> None:
        """Tell the app its screen gained or lost the keyboard's focus."""
        self._send(meta_packet("focus" if focused else "blur"))

    def redraw(self) -> None:
        """Have the app send its whole screen again."""
        self._send(meta_packet(REDRAW_META))

    def _send(self, data: bytes) -> None:
        process = self._process
        if process is None or process.returncode is not None or process.stdin is None:
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            process.stdin.write(data)

    async def ended(self) -> int:
        """Wait for the app to end (quit, or failed) and give its exit code."""
        assert self._process is not None
        code = await self._process.wait()
        for reader in self._readers:
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        return code

    async def stop(self) -> int | None:
        """Ask the app to quit as `q` would, then end it if it does not; its exit code."""
        process = self._process
        if process is None:
            return None
        if process.returncode is None:
            self._send(meta_packet("quit"))
            try:
                await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
            except asyncio.TimeoutError:
                process.terminate()
                try:
                    await asyncio.wait_for(process.wait(), STOP_TIMEOUT_S)
                except asyncio.TimeoutError:
                    process.kill()
        code = await process.wait()
        for reader in self._readers:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        return code
