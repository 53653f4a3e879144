"""The simulated SGLang replica in-process, on a free loopback port, for tests over HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from slotop.sim.server import ServerThread
from slotop.sim.sglang.flags import build_parser, replica_from_args
from slotop.sim.sglang.server import SglangServer
from slotop.sim.types import ServeOptions


@contextmanager
def running(*flags: str, warm_up_after_s: float | None = 0.0) -> Iterator[tuple[str, SglangServer]]:
    """A simulated SGLang replica with these flags on a free port (its warm-up done when it
    starts at once)."""
    args = build_parser().parse_args(["--served-model-name=tiny-llama", *flags])
    replica = replica_from_args(args)
    options = ServeOptions("127.0.0.1", 0, ("tiny-llama",), args.api_key, 0.05)
    thread = ServerThread(
        replica.engine,
        options,
        make=lambda: SglangServer(replica, options, warm_up_after_s=warm_up_after_s),
    )
    with thread:
        server = thread.server
        assert isinstance(server, SglangServer)
        if warm_up_after_s == 0.0:
            deadline = time.monotonic() + 10
            while not server.ready and time.monotonic() < deadline:
                time.sleep(0.01)
        yield thread.url, server
