"""The simulated replica's HTTP server: vLLM's OpenAI endpoints, /health, /version and /metrics.

`serve()` runs it in the foreground until SIGINT/SIGTERM (what `slotop sim` calls);
`SimServer` runs it on the caller's event loop; `ServerThread` runs it on a thread of its own
(tests, benchmarks, an embedded demo).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import logging
import os
import platform
import secrets
import signal
import struct
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol, TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from slotop.sim.engine import Engine
from slotop.sim.errors import SimError
from slotop.sim.gpu import SimGpus
from slotop.sim.metrics import SimMetrics, cache_config_labels
from slotop.sim.openai import (
    METHOD_NOT_ALLOWED_BODY,
    NOT_FOUND_BODY,
    UNAUTHORIZED_BODY,
    ApiError,
    GenerationRequest,
    bad_request,
    parse_chat,
    parse_completion,
    parse_json_body,
)
from slotop.sim.realtime import Call, RealtimeLoop
from slotop.sim.sse import (
    chat_body,
    completion_body,
    created_now,
    dumps_body,
    models_body,
    new_request_id,
    system_fingerprint,
)
from slotop.sim.types import EngineConfig, ServeOptions

logger = logging.getLogger("slotop.sim")

ServerT = TypeVar("ServerT", bound="RunnableServer")

VLLM_VERSION = "0.32.0"
"""The vLLM release whose API and metrics the simulated replica reproduces."""

_GUARDED_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
_JSON = "application/json"


STATS_LOG_INTERVAL_S = 10.0
"""How often the throughput line is logged (vLLM's default VLLM_LOG_STATS_INTERVAL)."""

RESYNC_AFTER_S = 0.25
"""How far behind schedule the host may fall before simulated time pauses for it to catch up."""


def _json(body: object, status: int = 200) -> web.Response:
    """A compact JSON response, as vLLM's JSONResponse writes it."""
    return web.Response(body=dumps_body(body), status=status, content_type=_JSON)


class SimServer:
    """One simulated replica on the running event loop: engine, real-time loop, metrics, HTTP."""

    def __init__(
        self, config: EngineConfig, options: ServeOptions, resync_after_s: float = RESYNC_AFTER_S
    ) -> None:
        self.config = config
        self.options = options
        self.engine = Engine(config)
        names = options.served_model_names or (config.model.name,)
        self._names = names
        self._resync_after_s = resync_after_s
        self.metrics = SimMetrics(
            names[0],
            config.max_model_len,
            cache_config_labels(config, self.engine.capacity),
            options.lag_log_threshold_s,
            SimGpus(config, self.engine.capacity, self.engine.gpu_activity),
        )
        self.fingerprint = system_fingerprint(
            VLLM_VERSION, config.tensor_parallel_size, repr(config)
        )
        keys = (options.api_key,) if options.api_key else ()
        self._token_hashes = [hashlib.sha256(key.encode()).digest() for key in keys]
        self._loop_runner: RealtimeLoop | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._calls: set[Call] = set()
        self.port = options.port

    @property
    def url(self) -> str:
        """Base URL the server answers on."""
        return f"http://{self.options.host}:{self.port}"

    def _app(self) -> web.Application:
        """Build the aiohttp application with vLLM's routes."""
        app = web.Application(
            middlewares=[self._instrument, self._errors_and_auth], client_max_size=64 * 2**20
        )
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_get("/version", self._version)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def start(self) -> None:
        """Bind and start serving; with port 0 the chosen port lands in `self.port`."""
        self._loop_runner = RealtimeLoop(
            self.engine, self.metrics, resync_after_s=self._resync_after_s
        )
        self._loop_task = asyncio.get_running_loop().create_task(self._loop_runner.run())
        self._runner = web.AppRunner(
            self._app(), handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port, reuse_address=True)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])

    async def log_stats_forever(self, interval_s: float = STATS_LOG_INTERVAL_S) -> None:
        """Every interval, log throughput and occupancy as vLLM's LoggingStatLogger does."""
        engine = self.engine
        before = engine.stats()
        while True:
            await asyncio.sleep(interval_s)
            now = engine.stats()
            generated = now.generation_tokens_total - before.generation_tokens_total
            if generated == 0 and now.num_running == 0 and now.num_waiting == 0:
                before = now
                continue
            preempted = now.preemptions_total - before.preemptions_total
            logger.info(
                "Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: "
                "%.1f tokens/s, Running: %d reqs, Waiting: %d reqs, %sGPU KV cache usage: %.1f%%, "
                "Prefix cache hit rate: %.1f%%",
                (now.prompt_tokens_total - before.prompt_tokens_total) / interval_s,
                generated / interval_s,
                now.num_running,
                now.num_waiting,
                f"Preemptions: {preempted}, " if preempted else "",
                now.kv_usage_ratio * 100,
                0.0,
            )
            before = now

    async def stop(self) -> None:
        """Stop accepting, abort every stream in flight, stop the engine loop."""
        if self._loop_runner is not None:
            for call in list(self._calls):
                self._loop_runner.abort(call)
                if call.transport is not None and not call.transport.is_closing():
                    call.transport.close()
        if self._loop_task is not None:
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task
        if self._runner is not None:
            await self._runner.cleanup()

    # --- middleware ----------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        """Check the bearer token the way vLLM's AuthenticationMiddleware does."""
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return False
        digest = hashlib.sha256(token.encode()).digest()
        matched = False
        for expected in self._token_hashes:
            matched |= secrets.compare_digest(digest, expected)
        return matched

    @web.middleware
    async def _instrument(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Count and time every request into the HTTP families, as vLLM's instrumentator does."""
        started = time.perf_counter()
        status = 500
        response_bytes = 0
        try:
            response = await handler(request)
            status = response.status
            response_bytes = response.content_length or 0
            return response
        finally:
            route = request.match_info.route.resource
            template = route.canonical if route is not None else None
            self.metrics.http.observe(
                template,
                request.method,
                status,
                request.content_length or 0,
                response_bytes,
                time.perf_counter() - started,
            )

    @web.middleware
    async def _errors_and_auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Guard /v1 with the API key, and turn errors into vLLM's bodies."""
        if (
            self._token_hashes
            and request.method != "OPTIONS"
            and request.path.startswith(_GUARDED_PREFIXES)
            and not self._authorized(request)
        ):
            return _json(UNAUTHORIZED_BODY, 401)
        try:
            return await handler(request)
        except ApiError as exc:
            return _json(exc.body(), exc.status)
        except web.HTTPMethodNotAllowed:
            return _json(METHOD_NOT_ALLOWED_BODY, 405)
        except web.HTTPNotFound:
            return _json(NOT_FOUND_BODY, 404)
        except web.HTTPException:
            raise
        except Exception as exc:
            logger.exception("error while serving %s %s", request.method, request.path)
            return _json(ApiError(500, "InternalServerError", str(exc)).body(), 500)

    # --- plain endpoints ----------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def _version(self, request: web.Request) -> web.Response:
        return _json({"version": VLLM_VERSION})

    async def _models(self, request: web.Request) -> web.Response:
        body = models_body(list(self._names), self.config.model.name, self.config.max_model_len)
        return _json(body)

    async def _metrics(self, request: web.Request) -> web.Response:
        response = web.Response(body=generate_latest(self.metrics.registry))
        response.headers["Content-Type"] = CONTENT_TYPE_LATEST
        return response

    # --- generation ---------------------------------------------------------------------

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = parse_json_body(await request.read(), request.headers.get("Content-Type", ""))
        parsed = parse_completion(body, self._names, self.config.max_model_len)
        return await self._generate(request, parsed)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = parse_json_body(await request.read(), request.headers.get("Content-Type", ""))
        parsed = parse_chat(body, self._names, self.config.max_model_len)
        return await self._generate(request, parsed)

    async def _generate(
        self, request: web.Request, parsed: GenerationRequest
    ) -> web.StreamResponse:
        """Submit to the engine, then stream tokens as they come or answer once all are done."""
        loop_runner = self._loop_runner
        assert loop_runner is not None, "start() the server before it serves"
        request_id = new_request_id(
            parsed.kind, request.headers.get("X-Request-Id") or parsed.base_id
        )
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        response: web.StreamResponse | None = None
        transport = None
        if parsed.stream:
            response = web.StreamResponse(
                headers={"Content-Type": "text/event-stream; charset=utf-8"}
            )
            writer = await response.prepare(request)
            send_headers = getattr(writer, "send_headers", None)
            if send_headers is not None:
                send_headers()
            transport = request.transport
        call = Call(parsed, request_id, created_now(), self.fingerprint, transport, done)
        try:
            loop_runner.submit(call)
        except SimError as exc:
            raise bad_request(str(exc)) from exc
        self._calls.add(call)
        try:
            await done
        finally:
            self._calls.discard(call)
            if not done.done() or call.remaining:
                loop_runner.abort(call)
        if response is not None:
            if call.remaining == 0 and transport is not None and not transport.is_closing():
                await response.write_eof()
            return response
        return _json(self._final_body(call))

    def _final_body(self, call: Call) -> dict[str, Any]:
        """The non-streamed answer once every choice has finished."""
        build = completion_body if call.request.kind == "completion" else chat_body
        choices = list(zip(call.output_tokens, call.finish_reasons, strict=True))
        return build(
            call.request_id,
            call.created,
            call.request.model_name,
            choices,
            call.prompt_tokens_total,
            self.fingerprint,
        )


def _log_startup(server: SimServer) -> None:
    """Log the start-up lines a watcher of `vllm serve` waits for, worded as vLLM words them."""
    capacity = server.engine.capacity
    logger.info("non-default args: %r", dict(server.options.non_default_args))
    logger.info(
        "GPU KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx",
        f"{capacity.kv_cache_size_tokens:,}",
        f"{capacity.max_model_len:,}",
        capacity.max_concurrency,
    )
    logger.info("Starting vLLM server on %s", server.url)
    logger.info("Application startup complete.")


SCHED_SLICE_S = 100e-6
"""The time slice the server asks Linux's scheduler for, at normal priority (nice unchanged).

Since Linux 6.12 (EEVDF) a task may ask for a shorter slice than the default 0.75-3 ms: its turns
come as often but end sooner, so a wake-up preempts a busy neighbour at once instead of waiting
out the neighbour's slice. The server sleeps until each step's tokens are due and writes them in
a sub-millisecond burst, so on a shared host this is the difference between writing on time and
waiting behind another process; it takes no larger share of the CPU. Older kernels ignore it.
`SLOTOP_SIM_SLICE_US` overrides it (0 leaves the kernel's default), for benches that compare.
"""

_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}
"""The sched_setattr system call's number on the architectures that have it under that name."""


def ask_for_short_slices(slice_s: float) -> bool:
    """Ask the scheduler for ``slice_s`` turns for this thread at its current priority.

    Returns whether the kernel took the request (it may still ignore the slice: before 6.12).
    """
    number = _SCHED_SETATTR.get(platform.machine())
    if sys.platform != "linux" or number is None or slice_s <= 0:
        return False
    import ctypes

    # struct sched_attr, version 0: size, policy, flags, nice, priority, runtime, deadline, period.
    attr = struct.pack(
        "=IIQiIQQQ", 48, os.SCHED_OTHER, 0, os.getpriority(os.PRIO_PROCESS, 0), 0,
        round(slice_s * 1e9), 0, 0,
    )  # fmt: skip
    buffer = ctypes.create_string_buffer(attr, len(attr))
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.syscall(number, 0, buffer, 0)) == 0


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` on uvloop when it is installed (as vLLM's uvicorn does), else on asyncio's loop."""
    if os.environ.get("SLOTOP_SIM_LOOP", "auto") != "asyncio":
        try:
            import uvloop
        except ImportError:
            pass
        else:
            uvloop.run(main)
            return
    asyncio.run(main)


class RunnableServer(Protocol):
    """A simulated replica's server as `run_server` and `ServerThread` drive it."""

    @property
    def url(self) -> str:
        """Base URL the server answers on."""

    async def start(self) -> None:
        """Bind and start serving."""

    async def stop(self) -> None:
        """Stop serving and the engine loop."""


def serve(config: EngineConfig, options: ServeOptions) -> int:
    """Run the simulated replica in the foreground until SIGINT or SIGTERM; return the exit code."""

    async def started(server: SimServer) -> None:
        _log_startup(server)
        await server.log_stats_forever()

    return run_server(lambda: SimServer(config, options), started, options)


def run_server(
    make: Callable[[], ServerT],
    started: Callable[[ServerT], Coroutine[Any, Any, None]],
    options: ServeOptions,
) -> int:
    """Run a server in the foreground until SIGINT or SIGTERM; return the exit code.

    `started` runs as a task once the server listens (start-up lines, periodic logs) and is
    cancelled at shutdown.
    """
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO,
            format="%(levelname)s %(asctime)s [sim] %(message)s",
            datefmt="%m-%d %H:%M:%S",
            stream=sys.stderr,
        )

    slice_s = float(os.environ.get("SLOTOP_SIM_SLICE_US", SCHED_SLICE_S * 1e6)) / 1e6
    if ask_for_short_slices(slice_s):
        logger.debug("asked the scheduler for %.0f us time slices", slice_s * 1e6)

    async def main() -> None:
        server = make()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        await server.start()
        gc.freeze()
        started_task = loop.create_task(started(server))
        try:
            await stop.wait()
        finally:
            started_task.cancel()
            logger.info("Shutting down")
            await server.stop()

    try:
        _run(main())
    except OSError as exc:
        logger.error("cannot listen on %s:%d: %s", options.host, options.port, exc.strerror)
        return 1
    return 0


class ServerThread:
    """Runs a SimServer on a daemon thread with its own event loop; a context manager.

    `make` builds another server instead (the SGLang one) when given.
    """

    def __init__(
        self,
        config: EngineConfig,
        options: ServeOptions,
        make: Callable[[], RunnableServer] | None = None,
    ) -> None:
        self._make: Callable[[], RunnableServer] = make or (lambda: SimServer(config, options))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="slotop-sim", daemon=True
        )
        self.server: RunnableServer | None = None

    @property
    def url(self) -> str:
        """Base URL of the running server."""
        assert self.server is not None, "start() the thread first"
        return self.server.url

    def start(self, timeout_s: float = 10.0) -> ServerThread:
        """Start the thread and wait until the server listens."""
        self._thread.start()

        async def begin() -> RunnableServer:
            server = self._make()
            await server.start()
            return server

        self.server = asyncio.run_coroutine_threadsafe(begin(), self._loop).result(timeout_s)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop the server and the thread."""
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.stop(), self._loop).result(timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        self._loop.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
