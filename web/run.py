"""Run `slotop web`: listen, say where, serve until stopped, then quit the app in order."""

from __future__ import annotations

import asyncio
import ipaddress
import signal
from collections.abc import Callable, Sequence

from slotop.web.server import WebServer
from slotop.web.shared import SharedApp

DEFAULT_PORT = 8750


def exposure(host: str) -> str | None:
    """What listening on `host` exposes beyond this machine, in words; None for loopback."""
    if host == "localhost":
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return f"{host} (whatever that name leads to)"
    if address.is_loopback:
        return None
    if address.is_unspecified:
        return "every network this machine is on"
    return f"the network of {host}"


def serve(
    argv: Sequence[str],
    *,
    what: str,
    host: str,
    port: int,
    say: Callable[[str], None],
) -> int:
    """Serve the app `argv` starts to browsers until SIGINT, SIGTERM or SIGHUP; 0 then."""
    return asyncio.run(_serve(argv, what=what, host=host, port=port, say=say))


async def _serve(
    argv: Sequence[str], *, what: str, host: str, port: int, say: Callable[[str], None]
) -> int:
    shared = SharedApp(argv, say)
    server = WebServer(shared, title=f"slotop · {what}", host=host, port=port)
    await server.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    say(f"serving the dashboard of {what} to browsers at\n\n    {server.address()}\n")
    reach = exposure(host)
    if reach is not None:
        say(
            f"listening on {host}: {reach} can reach port {server.port}. The token in the "
            "address is the only key, and the traffic is plain HTTP: anyone on the way can "
            "read both. On a network you do not trust, keep the default (127.0.0.1) and "
            f"forward the port instead: ssh -L {server.port}:127.0.0.1:{server.port} THIS-HOST"
        )
    say(
        "Anyone with the address can watch; share it as you would a password. The first browser "
        "to open it holds the control (its keys reach the dashboard: load, sweep, restart); the "
        "others watch read-only until the control is released or its holder leaves. "
        "Ctrl+C stops it, and the dashboard with it."
    )
    try:
        await stop.wait()
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        say("stopping")
        await shared.close()
        await server.close()
    return 0
