"""The simulated SGLang replica's HTTP server: SGLang 0.5.23's endpoints around the sim's engine.

`/v1/completions` and `/v1/chat/completions` (streamed or not), `/v1/models`, `/health` and
`/health_generate`, `/get_model_info` (and `/model_info`), `/get_server_info` (and
`/server_info`) and, with `--enable-metrics`, `/metrics`; `/version` is a 404 as on the real one.
Like SGLang it answers 503 on /health until its start-up warm-up request (a non-streaming
`/generate` of 8 tokens, counted in its metrics) is done, and then takes at least a second to
answer it, as its health check waits a second for the engine to prove alive. With `--api-key`
every path but /health*, /ready* and /metrics* needs the bearer token.

`serve()` runs it in the foreground (what `slotop sim --engine sglang` calls); `SglangServer`
runs it on the caller's event loop (tests run it through `slotop.sim.server.ServerThread`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from prometheus_client.exposition import choose_encoder

from slotop.sim.engine import Engine
from slotop.sim.errors import SimError
from slotop.sim.gpu import SimGpus
from slotop.sim.openai import GenerationRequest
from slotop.sim.prompts import completion_prompt_ids
from slotop.sim.realtime import Call, ChoiceFrames, RealtimeLoop
from slotop.sim.server import RESYNC_AFTER_S, run_server
from slotop.sim.sglang.api import (
    METHOD_NOT_ALLOWED_BODY,
    NOT_FOUND_BODY,
    UNAUTHORIZED_BODY,
    SglangApiError,
    bad_request,
    parse_chat,
    parse_completion,
    parse_json_body,
)
from slotop.sim.sglang.config import SglangReplica
from slotop.sim.sglang.defaults import SGLANG_VERSION
from slotop.sim.sglang.metrics import SglangMetrics
from slotop.sim.sglang.report import start_up_lines
from slotop.sim.sglang.server_info import model_info, server_args, server_info
from slotop.sim.sglang.sse import (
    ChatChoiceStream,
    CompletionChoiceStream,
    StreamState,
    chat_closer,
    completion_closer,
    dumps,
    eos_token_id,
    models_body,
    new_rid,
    response_body,
)
from slotop.sim.types import ServeOptions

logger = logging.getLogger("slotop.sim")

HEALTH_WAIT_S = 1.0
"""SGLang's health check waits this long for the engine's output before it answers 200."""

WARMUP_AFTER_S = 1.0
"""SGLang's warm-up thread sleeps a second before its first request to the new server."""

WARMUP_PROMPT = "The capital city of France is"
WARMUP_MAX_NEW_TOKENS = 8

_OPEN_PREFIXES = ("/health", "/ready", "/metrics")
"""Paths SGLang serves without the API key (probes and scrapers)."""

_ROUTE_LABELS = {"/v1/models/{model}": "/v1/models/{model:path}", "/metrics{tail}": "/metrics"}
"""Route paths as SGLang's FastAPI names them, where aiohttp spells them otherwise."""

_JSON = "application/json"


def _json(body: object, status: int = 200) -> web.Response:
    """A compact JSON response, as SGLang's JSON responses write it."""
    return web.Response(body=dumps(body).encode(), status=status, content_type=_JSON)


class SglangServer:
    """One simulated SGLang replica on the running event loop: engine, loop, metrics, HTTP."""

    def __init__(
        self,
        replica: SglangReplica,
        options: ServeOptions,
        resync_after_s: float = RESYNC_AFTER_S,
        warm_up_after_s: float | None = WARMUP_AFTER_S,
    ) -> None:
        self.replica = replica
        self.options = options
        self.config = replica.engine
        self.engine = Engine(replica.engine)
        self.metrics = SglangMetrics(
            replica,
            options.lag_log_threshold_s,
            SimGpus(self.config, self.engine.capacity, self.engine.gpu_activity),
            self.engine.gpu_activity,
        )
        self._resync_after_s = resync_after_s
        self._warm_up_after_s = warm_up_after_s
        self._eos = eos_token_id(self.config.model)
        self._ready = warm_up_after_s is None
        self._loop_runner: RealtimeLoop | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._warmup_task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._calls: set[Call] = set()
        self.port = options.port

    @property
    def url(self) -> str:
        """Base URL the server answers on."""
        return f"http://{self.options.host}:{self.port}"

    @property
    def ready(self) -> bool:
        """Whether the warm-up is done (before it, /health answers 503); with `warm_up_after_s`
        None there is none (its metrics then lack the warm-up request)."""
        return self._ready

    def _app(self) -> web.Application:
        """The aiohttp application with SGLang's routes."""
        app = web.Application(
            middlewares=[self._auth, self._instrument, self._errors], client_max_size=64 * 2**20
        )
        router = app.router
        router.add_post("/v1/completions", self._completions)
        router.add_post("/v1/chat/completions", self._chat)
        router.add_get("/v1/models", self._models)
        router.add_get("/v1/models/{model:.+}", self._model)
        for path in ("/health", "/health_generate"):
            router.add_get(path, self._health)
        for path in ("/get_model_info", "/model_info"):
            router.add_get(path, self._model_info)
        for path in ("/get_server_info", "/server_info"):
            router.add_get(path, self._server_info)
        router.add_get("/v1/loads", self._loads)
        if self.replica.args.enable_metrics:
            router.add_get("/metrics{tail:.*}", self._metrics)
        return app

    async def start(self) -> None:
        """Bind, start serving, and send the warm-up request; with port 0 the port lands in `port`."""
        self._loop_runner = RealtimeLoop(
            self.engine, self.metrics, resync_after_s=self._resync_after_s
        )
        loop = asyncio.get_running_loop()
        self._loop_task = loop.create_task(self._loop_runner.run())
        self._runner = web.AppRunner(
            self._app(), handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.options.host, self.options.port, reuse_address=True)
        await site.start()
        addresses = self._runner.addresses
        if addresses:
            self.port = int(addresses[0][1])
        if self._warm_up_after_s is not None:
            self._warmup_task = loop.create_task(self._warm(self._warm_up_after_s))

    async def wait_ready(self, timeout_s: float = 10.0) -> None:
        """Wait until the warm-up is done."""
        if self._warmup_task is not None:
            await asyncio.wait_for(asyncio.shield(self._warmup_task), timeout_s)

    async def stop(self) -> None:
        """Stop accepting, abort every stream in flight, stop the engine loop."""
        if self._loop_runner is not None:
            for call in list(self._calls):
                self._loop_runner.abort(call)
                if call.transport is not None and not call.transport.is_closing():
                    call.transport.close()
        for task in (self._warmup_task, self._loop_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._runner is not None:
            await self._runner.cleanup()

    async def _warm(self, after_s: float) -> None:
        """SGLang's start-up warm-up: /model_info, one non-streaming /generate, /freeze_gc."""
        await asyncio.sleep(after_s)
        http = self.metrics.http if self.replica.args.enable_metrics else None
        if http is not None:
            http.served("/model_info", "GET", 200)
            http.began("/generate", "POST")
        ids = completion_prompt_ids(WARMUP_PROMPT)
        request = GenerationRequest(
            kind="completion",
            model_name=self.replica.served_model_name,
            prompt_tokens=(len(ids),),
            max_tokens=(WARMUP_MAX_NEW_TOKENS,),
            n=1,
            ignore_eos=True,
            stream=False,
            include_usage=False,
            continuous_usage=False,
            base_id=None,
            prompt_token_ids=(ids,),
            text_prompts=(True,),
        )
        await self._run(request, new_rid(), None)
        if http is not None:
            http.ended("/generate", "POST", 200)
            http.served("/freeze_gc", "POST", 200)
        self._ready = True
        logger.info("The server is fired up and ready to roll!")

    # --- middleware ----------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        """Check the bearer token the way SGLang's API-key middleware does."""
        key = self.options.api_key
        if not key or request.method == "OPTIONS" or request.path.startswith(_OPEN_PREFIXES):
            return True
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(token, key)

    @web.middleware
    async def _auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Refuse requests without the API key before anything counts them."""
        if not self._authorized(request):
            return _json(UNAUTHORIZED_BODY, 401)
        return await handler(request)

    @web.middleware
    async def _instrument(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Count the request into SGLang's HTTP families (with --enable-metrics)."""
        if not self.replica.args.enable_metrics:
            return await handler(request)
        resource = request.match_info.route.resource
        endpoint = request.path
        if resource is not None:
            endpoint = _ROUTE_LABELS.get(resource.canonical, resource.canonical)
        http = self.metrics.http
        http.began(endpoint, request.method)
        status: int | None = None
        try:
            response = await handler(request)
            status = response.status
            return response
        finally:
            http.ended(endpoint, request.method, status)

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Turn errors into SGLang's bodies."""
        try:
            return await handler(request)
        except SglangApiError as exc:
            return _json(exc.body(), exc.status)
        except web.HTTPMethodNotAllowed:
            return _json(METHOD_NOT_ALLOWED_BODY, 405)
        except web.HTTPNotFound:
            return _json(NOT_FOUND_BODY, 404)
        except web.HTTPException:
            raise
        except Exception as exc:
            logger.exception("error while serving %s %s", request.method, request.path)
            return _json(SglangApiError(500, "InternalServerError", str(exc)).body(), 500)

    # --- plain endpoints -----------------------------------------------------------------

    async def _health(self, request: web.Request) -> web.Response:
        if not self._ready:
            return web.Response(status=503)
        await asyncio.sleep(HEALTH_WAIT_S)
        return web.Response(status=200)

    async def _models(self, request: web.Request) -> web.Response:
        body = models_body(
            self.replica.served_model_name, self.replica.context_len, int(time.time())
        )
        return _json(body)

    async def _model(self, request: web.Request) -> web.Response:
        model = request.match_info["model"]
        if model != self.replica.served_model_name:
            return _json(
                {
                    "error": {
                        "message": f"The model '{model}' does not exist",
                        "type": "invalid_request_error",
                        "param": "model",
                        "code": "model_not_found",
                    }
                },
                404,
            )
        card = models_body(model, self.replica.context_len, int(time.time()))["data"][0]
        return _json(card)

    async def _model_info(self, request: web.Request) -> web.Response:
        return _json(model_info(self.replica))

    async def _server_info(self, request: web.Request) -> web.Response:
        return _json(server_info(self.replica, self.metrics.last_gen_throughput))

    async def _loads(self, request: web.Request) -> web.Response:
        """What the scheduler holds when asked, as SGLang's `/v1/loads` says it (its core keys:
        the counts slotop reads, not its memory, queue and disaggregation detail)."""
        stats = self.engine.stats()
        page = self.replica.page_size
        used = stats.kv_blocks_used * page
        total = self.replica.max_total_num_tokens
        load = {
            "timestamp": time.time(),
            "dp_rank": 0,
            "num_running_reqs": stats.num_running,
            "num_waiting_reqs": stats.num_waiting,
            "num_used_tokens": used,
            "max_total_num_tokens": total,
            "max_running_requests": self.replica.max_running_requests,
            "token_usage": round(used / total, 2) if total else 0.0,
            "gen_throughput": self.metrics.last_gen_throughput,
        }
        return _json(
            {
                "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                "version": SGLANG_VERSION,
                "accelerator": None,
                "num_accelerators": 1,
                "loads": [load],
            }
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        # As SGLang's prometheus_client app: a scraper asking for OpenMetrics 1.0 (Prometheus 2)
        # gets it, its names escaped (`sglang_...`); any other gets the text format.
        encode, content_type = choose_encoder(request.headers.get("Accept", ""))
        response = web.Response(body=encode(self.metrics.registry))
        response.headers["Content-Type"] = content_type
        return response

    # --- generation ----------------------------------------------------------------------

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        body = parse_json_body(
            await request.read(), request.headers.get("Content-Type", ""), "POST", request.path
        )
        parsed = parse_completion(body, self.replica.context_len, self.config.max_model_len)
        return await self._generate(request, parsed)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = parse_json_body(
            await request.read(), request.headers.get("Content-Type", ""), "POST", request.path
        )
        parsed = parse_chat(body, self.replica.context_len, self.config.max_model_len)
        return await self._generate(request, parsed)

    async def _generate(
        self, request: web.Request, parsed: GenerationRequest
    ) -> web.StreamResponse:
        """Run the request; stream its events as the tokens come, or answer once all are done."""
        rids = [new_rid() for _ in range(parsed.num_choices)]
        if not parsed.stream:
            call = await self._run(parsed, rids[0], None)
            choices = list(zip(call.output_tokens, call.finish_reasons, strict=True))
            body = response_body(
                parsed.kind,
                rids[0],
                call.created,
                parsed.model_name,
                choices,
                call.prompt_tokens_total,
                self._eos,
            )
            return _json(body)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        writer = await response.prepare(request)
        send_headers = getattr(writer, "send_headers", None)
        if send_headers is not None:
            send_headers()
        call = await self._run(parsed, rids[0], request.transport, rids)
        transport = request.transport
        if call.remaining == 0 and transport is not None and not transport.is_closing():
            await response.write_eof()
        return response

    async def _run(
        self,
        parsed: GenerationRequest,
        request_id: str,
        transport: Any,
        rids: list[str] | None = None,
    ) -> Call:
        """Submit one call to the engine and wait until every choice has ended."""
        loop_runner = self._loop_runner
        assert loop_runner is not None, "start() the server before it serves"
        created = int(time.time())
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        streams: list[ChoiceFrames] | None = None
        closer: Callable[[Call], bytes] | None = None
        if transport is not None and rids is not None:
            streams, closer = self._stream_parts(parsed, created, rids)
        call = Call(parsed, request_id, created, None, transport, done, streams, closer)
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
        return call

    def _stream_parts(
        self, parsed: GenerationRequest, created: int, rids: list[str]
    ) -> tuple[list[ChoiceFrames], Callable[[Call], bytes]]:
        """Each choice's event renderer, and what follows the last token, in SGLang's shapes."""
        shared = StreamState()
        model = parsed.model_name
        streams: list[ChoiceFrames] = []
        for index, rid in enumerate(rids):
            prompt_tokens = parsed.prompt_tokens[index // parsed.n]
            if parsed.kind == "completion":
                completion = CompletionChoiceStream(
                    rid, created, model, index, prompt_tokens, parsed.continuous_usage, self._eos,
                    shared,
                )  # fmt: skip
                streams.append(completion)
            else:
                streams.append(
                    ChatChoiceStream(
                        rid, created, model, index, prompt_tokens, parsed.continuous_usage, shared
                    )
                )
        if parsed.kind == "completion":
            close = completion_closer(created, model, parsed.include_usage, shared)
        else:
            close = chat_closer(created, model, parsed.include_usage, self._eos, shared)
        return streams, lambda call: close(call.prompt_tokens_total, sum(call.output_tokens))


def log_startup(server: SglangServer) -> None:
    """Log the start-up lines a watcher of SGLang's server reads, worded as SGLang words them."""
    logger.info("server_args=%r", server_args(server.replica))
    for line in start_up_lines(server.replica):
        logger.info("%s", line)
    logger.info("Uvicorn running on %s (Press CTRL+C to quit)", server.url)


def serve(replica: SglangReplica, options: ServeOptions) -> int:
    """Run the simulated SGLang replica in the foreground until SIGINT or SIGTERM."""

    async def started(server: SglangServer) -> None:
        log_startup(server)
        await asyncio.Event().wait()

    return run_server(lambda: SglangServer(replica, options), started, options)
