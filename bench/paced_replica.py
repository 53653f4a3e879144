"""A stand-in replica whose timing is known: a clock to measure streaming clients against.

It answers /v1/models and streams /v1/completions (or chat) in vLLM's event shapes: the first
token chunk after `--ttft-ms`, then one chunk every `--itl-ms` on an absolute schedule, `max_tokens`
chunks, a usage chunk and `[DONE]`. With `--itl-ms 0` it is a firehose that writes as fast as the
client reads, so the client's own chunk rate is what limits the run.

    python bench/paced_replica.py --port 8123 --ttft-ms 30 --itl-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Sequence

_HEAD = '{{"id":"cmpl-{rid}","object":"text_completion","created":1,"model":"{model}","choices":'


def _chunk(payload: bytes) -> bytes:
    return f"{len(payload):x}\r\n".encode() + payload + b"\r\n"


def _event(data: str) -> bytes:
    return _chunk(f"data: {data}\n\n".encode())


async def _stream(
    writer: asyncio.StreamWriter, body: dict[str, object], args: argparse.Namespace, rid: int
) -> None:
    tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)  # type: ignore[call-overload]
    chat = "messages" in body
    head = _HEAD.format(rid=rid, model=args.model)
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\n\r\n"
    )
    loop = asyncio.get_running_loop()
    due = loop.time() + args.ttft_ms / 1000
    for index in range(tokens):
        if args.itl_ms > 0 or index == 0:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            due += args.itl_ms / 1000
        finish = '"length"' if index == tokens - 1 else "null"
        piece = (
            f'{{"index":0,"delta":{{"content":" w{index}"}},"finish_reason":{finish}}}'
            if chat
            else f'{{"index":0,"text":" w{index}","logprobs":null,"finish_reason":{finish}}}'
        )
        writer.write(_event(f"{head}[{piece}]}}"))
        await writer.drain()
    usage = f'{{"prompt_tokens":{args.prompt_tokens},"completion_tokens":{tokens}}}'
    writer.write(_event(f'{head}[],"usage":{usage}}}') + _event("[DONE]") + _chunk(b""))
    await writer.drain()


async def _serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, args: argparse.Namespace
) -> None:
    rid = 0
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {
                k.strip().lower(): v.strip()
                for k, _, v in (x.partition(":") for x in lines[1:] if x)
            }
            body_bytes = await reader.readexactly(int(headers.get("content-length", "0")))
            if method == "GET" and path.startswith("/v1/models"):
                payload = json.dumps({"object": "list", "data": [{"id": args.model}]}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
            elif method == "POST" and path.endswith("completions"):
                rid += 1
                await _stream(writer, json.loads(body_bytes or b"{}"), args, rid)
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
            await writer.drain()
    writer.close()


async def _main(args: argparse.Namespace) -> None:
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(r, w, args), args.host, args.port, backlog=1024
    )
    async with server:
        await server.serve_forever()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttft-ms", type=float, default=30.0)
    parser.add_argument("--itl-ms", type=float, default=5.0)
    parser.add_argument("--model", default="tiny-llama")
    parser.add_argument("--prompt-tokens", type=int, default=64, help="reported in usage")
    args = parser.parse_args(argv)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
