"""One streamed request: SSE splitting, chunk timing, usage, and every error class, over MockTransport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import pytest

from slotop.collectors.probe.loadshape import PlannedRequest
from slotop.collectors.probe.records import ErrorClass
from slotop.collectors.probe.stream import (
    ProbeTarget,
    StreamDataError,
    StreamMeter,
    StreamOutcome,
    request_body,
    stream_request,
)


def chunk(text: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    return b"data: " + json.dumps({"id": "cmpl-1", "choices": [choice], "usage": None}).encode()


USAGE = b'data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}'
DONE = b"data: [DONE]"


def events(*items: bytes) -> bytes:
    return b"".join(item + b"\n\n" for item in items)


def test_meter_times_token_chunks_and_reads_usage() -> None:
    meter = StreamMeter(sent_at_s=10.0)
    meter.feed(events(chunk("a")), 10.5)
    meter.feed(events(chunk("b")), 10.75)
    meter.feed(events(chunk("c", "length"), USAGE, DONE), 11.0)
    assert meter.ttft_s == 0.5
    assert meter.gaps_s == [0.25, 0.25]
    assert meter.e2e_s == 1.0  # the last token chunk, not the usage chunk after it
    assert (meter.chunk_count, meter.prompt_tokens, meter.output_tokens) == (3, 5, 3)
    assert meter.finish_reason == "length"
    assert meter.done


def test_meter_joins_events_split_across_reads_and_stamps_them_when_complete() -> None:
    raw = events(chunk("a"), chunk("b"))
    meter = StreamMeter(sent_at_s=0.0)
    cut = len(raw) // 2 + 3
    meter.feed(raw[:cut], 1.0)  # the first event ends before the cut
    meter.feed(raw[cut:], 2.0)
    assert meter.ttft_s == 1.0
    assert meter.gaps_s == [1.0]


def test_meter_counts_empty_text_chunks_and_skips_comments() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(b": ping\n\n" + events(chunk("")) + b"event: x\ndata: [DONE]\r\n\n", 1.0)
    assert meter.chunk_count == 1  # a chunk with choices counts even with empty text
    assert meter.done


def compact(obj: object) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode()


def test_compact_token_chunks_are_counted_and_the_rest_still_parsed() -> None:
    def choice(text: str, finish: str | None) -> dict[str, object]:
        return {"choices": [{"index": 0, "text": text, "finish_reason": finish}], "usage": None}

    tricky = 'say "choices":[{ and "finish_reason":null'  # escaped inside the string: no match
    continuous = {**choice("c", None), "usage": {"prompt_tokens": 5, "completion_tokens": 3}}
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(compact(choice("a", None)), compact(choice(tricky, None))), 1.0)
    meter.feed(events(compact(continuous)), 2.0)
    meter.feed(events(compact(choice("d", "stop")), DONE), 3.0)
    assert meter.chunk_count == 4
    assert meter.gaps_s == [0.0, 1.0, 1.0]
    assert (meter.output_tokens, meter.prompt_tokens) == (3, 5)  # a usage object is parsed
    assert meter.finish_reason == "stop"  # a finishing chunk is parsed
    assert meter.done


# vLLM 0.32's chat chunks as its replica sends them (tests/sim/fixtures/vllm-0.32-cpu-api.json)
CHAT_HEAD = (
    '{"id":"chatcmpl-a8","object":"chat.completion.chunk","created":1,"model":"m","choices":'
)
CHAT_ROLE = (
    "data: " + CHAT_HEAD + '[{"index":0,"delta":{"role":"assistant","content":""},'
    '"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}'
).encode()


def chat_chunk(content: str, finish: str | None = None, usage: str = "") -> bytes:
    reason = "null" if finish is None else f'"{finish}","stop_reason":null'
    choice = f'{{"index":0,"delta":{{"content":{json.dumps(content)}}},"logprobs":null,'
    tail = f',"usage":{usage}' if usage else ""
    return (
        f'data: {CHAT_HEAD}[{choice}"finish_reason":{reason},"token_ids":null}}]{tail}}}'.encode()
    )


def usage_json(prompt: int, completion: int) -> str:
    total = prompt + completion
    return f'{{"prompt_tokens":{prompt},"total_tokens":{total},"completion_tokens":{completion}}}'


def chat_usage(completion_tokens: int) -> bytes:
    return f'data: {CHAT_HEAD}[],"usage":{usage_json(14, completion_tokens)}}}'.encode()


def test_a_chat_stream_is_timed_from_its_first_token_not_from_the_role_chunk() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(CHAT_ROLE), 0.25)  # opens the message: no token, so no TTFT and no gap
    meter.feed(events(chat_chunk("\u0016")), 0.5)
    meter.feed(events(chat_chunk("")), 0.75)  # an empty delta after the first token is a token
    meter.feed(events(chat_chunk("\ufffd all", "length"), DONE), 1.0)
    assert meter.ttft_s == 0.5
    assert meter.gaps_s == [0.25, 0.25]
    assert meter.e2e_s == 1.0
    assert meter.chunk_count == 3  # without usage, 3 output tokens, not 4
    assert meter.output_tokens is None
    assert meter.finish_reason == "length"


def test_a_role_chunk_read_with_the_first_token_adds_no_gap() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(CHAT_ROLE, chat_chunk("a")), 0.5)  # vLLM writes both in one engine step
    meter.feed(events(chat_chunk("b", "length"), chat_usage(2), DONE), 0.75)
    assert (meter.ttft_s, meter.gaps_s) == (0.5, [0.25])
    assert (meter.chunk_count, meter.output_tokens) == (2, 2)


# SGLang 0.5.23's chat chunks: the last token comes alone, then a chunk that only closes.
SGLANG_HEAD = '{"id":"5f0c","object":"chat.completion.chunk","created":1,"model":"tiny-llama",'


def sglang_chat(delta: str, finish: str | None = None) -> bytes:
    reason = "null" if finish is None else f'"{finish}"'
    return (
        f'data: {SGLANG_HEAD}"choices":[{{"index":0,"delta":{delta},"logprobs":null,'
        f'"finish_reason":{reason},"matched_stop":null}}],"usage":null}}'
    ).encode()


def test_sglangs_closing_chat_chunk_is_not_a_token() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    role = '{"reasoning_content":null,"role":"assistant","content":""}'
    meter.feed(events(sglang_chat(role)), 0.25)
    meter.feed(events(sglang_chat('{"reasoning_content":null,"content":"a"}')), 0.5)
    meter.feed(events(sglang_chat('{"reasoning_content":null,"content":"b"}')), 0.75)
    meter.feed(events(sglang_chat('{"reasoning_content":null}', "length")), 0.8)
    assert (meter.ttft_s, meter.gaps_s, meter.e2e_s) == (0.5, [0.25], 0.75)
    assert (meter.chunk_count, meter.finish_reason) == (2, "length")


def test_a_last_token_with_empty_text_and_the_finish_is_still_a_token() -> None:
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(chat_chunk("a")), 0.5)
    meter.feed(events(chat_chunk("", "length")), 0.75)  # ends mid-character: text comes later
    assert meter.chunk_count == 2


def test_chat_deltas_that_carry_a_role_and_text_are_tokens() -> None:
    repeats_role = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}
    token = b"data: " + json.dumps(repeats_role).encode()  # servers that send the role every time
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(token), 0.5)
    meter.feed(events(token), 0.75)
    assert (meter.ttft_s, meter.gaps_s, meter.chunk_count) == (0.5, [0.25], 2)


def test_continuous_usage_counts_to_the_last_and_the_role_chunks_zero_is_no_count() -> None:
    def usage(done: int) -> str:
        return usage_json(13, done)

    role = CHAT_ROLE.replace(
        b'"finish_reason":null}]', b'"finish_reason":null}],"usage":' + usage(0).encode()
    )
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(role), 0.5)
    assert meter.output_tokens is None  # zero is what vLLM puts there before any token
    meter.feed(events(chat_chunk(" small", usage=usage(1))), 1.0)
    meter.feed(events(chat_chunk(" g", "length", usage=usage(2)), chat_usage(2), DONE), 1.5)
    assert (meter.chunk_count, meter.output_tokens, meter.prompt_tokens) == (2, 2, 14)


def test_a_usage_count_of_zero_beside_token_chunks_is_no_count() -> None:
    zero = b'data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0}}'
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(chunk("a"), chunk("b"), chunk("c", "length"), zero, DONE), 1.0)
    assert (meter.chunk_count, meter.output_tokens, meter.prompt_tokens) == (3, None, 5)


def test_a_chunk_carrying_several_tokens_is_one_gap_and_usage_counts_its_tokens() -> None:
    five = b'data: {"id":"cmpl-1","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":5}}'
    meter = StreamMeter(sent_at_s=0.0)
    meter.feed(events(chunk(" a b")), 0.25)  # two tokens detokenised together
    meter.feed(events(chunk(" c")), 0.5)
    meter.feed(events(chunk(" d e", "length"), five, DONE), 1.0)
    assert meter.gaps_s == [0.25, 0.5]  # one gap per chunk, not per token
    assert (meter.chunk_count, meter.output_tokens) == (3, 5)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"data: {oops\n\n", "not JSON"),
        (b"data: [1]\n\n", "not a JSON object"),
        (b'data: {"error": {"message": "engine dead", "code": 500}}\n\n', "engine dead"),
    ],
)
def test_meter_raises_on_bad_data_and_error_events(raw: bytes, words: str) -> None:
    with pytest.raises(StreamDataError, match=words):
        StreamMeter(sent_at_s=0.0).feed(raw, 1.0)


def planned(**changes: object) -> PlannedRequest:
    base = {"text": None, "token_ids": (20, 21), "messages": None, "prompt_tokens": 2}
    base.update(changes)
    return PlannedRequest(output_tokens=4, **base)  # type: ignore[arg-type]


def test_completions_body_pins_the_output_length_and_asks_for_usage() -> None:
    body = request_body("completions", "m", planned(), ignore_eos=True)
    assert body == {
        "model": "m",
        "prompt": [20, 21],
        "max_tokens": 4,
        "stream": True,
        "stream_options": {"include_usage": True},
        "ignore_eos": True,
    }
    text_body = request_body("completions", None, planned(text="hi", token_ids=None), False)
    assert "model" not in text_body and "ignore_eos" not in text_body
    assert text_body["prompt"] == "hi"


def test_chat_body_sends_messages_and_max_completion_tokens() -> None:
    messages = ({"role": "user", "content": "hi"},)
    body = request_body("chat", "m", planned(token_ids=None, messages=messages), True)
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    assert body["max_completion_tokens"] == 4
    assert "prompt" not in body and "max_tokens" not in body


def test_target_builds_the_url_and_keeps_the_key_out_of_repr() -> None:
    target = ProbeTarget("http://127.0.0.1:8000/", api_key="sekret")
    assert target.url("chat") == "http://127.0.0.1:8000/v1/chat/completions"
    assert target.url("completions") == "http://127.0.0.1:8000/v1/completions"
    assert target.headers()["Authorization"] == "Bearer sekret"
    assert "sekret" not in repr(target)
    assert "Authorization" not in ProbeTarget("http://h:1").headers()


class Stream(httpx.AsyncByteStream):
    """A response body that yields its pieces, then optionally raises."""

    def __init__(self, pieces: list[bytes], then: Exception | None = None) -> None:
        self._pieces = pieces
        self._then = then

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            await asyncio.sleep(0)
            yield piece
        if self._then is not None:
            raise self._then


def run(
    handler: Callable[[httpx.Request], httpx.Response],
) -> tuple[StreamMeter, StreamOutcome, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def recording(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)

    ticks: Iterator[float] = iter(float(i) for i in range(1, 100))
    meter, outcome = StreamMeter(sent_at_s=0.0), StreamOutcome()

    async def go() -> None:
        async with httpx.AsyncClient(transport=httpx.MockTransport(recording)) as client:
            await stream_request(
                client,
                "http://replica/v1/completions",
                b"{}",
                {"X-T": "1"},
                meter,
                outcome,
                clock=lambda: next(ticks),
            )

    asyncio.run(go())
    return meter, outcome, seen


def test_a_full_stream_has_no_error_and_one_timestamp_per_read() -> None:
    pieces = [events(chunk("a")), events(chunk("b"), chunk("c")), events(USAGE, DONE)]
    meter, outcome, seen = run(lambda _: httpx.Response(200, stream=Stream(pieces)))
    assert outcome.error is None and outcome.http_status == 200
    assert meter.ttft_s == 1.0
    assert meter.gaps_s == [1.0, 0.0]  # two chunks in one read arrived together
    assert meter.e2e_s == 2.0
    assert seen[0].headers["X-T"] == "1"


@pytest.mark.parametrize(
    ("handler", "error", "detail"),
    [
        (
            lambda _: httpx.Response(400, json={"error": {"message": "prompt too long"}}),
            ErrorClass.HTTP_STATUS,
            "HTTP 400: prompt too long",
        ),
        (lambda _: httpx.Response(503, text=""), ErrorClass.HTTP_STATUS, "HTTP 503"),
        (
            lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused", request=r)),
            ErrorClass.CONNECT,
            "ConnectError: refused",
        ),
        (
            lambda r: (_ for _ in ()).throw(httpx.ReadTimeout("slow", request=r)),
            ErrorClass.TIMEOUT,
            "ReadTimeout",
        ),
        (
            lambda r: httpx.Response(
                200, stream=Stream([events(chunk("a"))], httpx.ReadError("reset"))
            ),
            ErrorClass.STREAM_CUT,
            "ReadError: reset",
        ),
        (
            lambda _: httpx.Response(200, stream=Stream([events(chunk("a"))])),
            ErrorClass.STREAM_CUT,
            "without [DONE]",
        ),
        (
            lambda _: httpx.Response(200, stream=Stream([events(USAGE, DONE)])),
            ErrorClass.STREAM_ERROR,
            "no token chunk",
        ),
        (
            lambda _: httpx.Response(200, stream=Stream([b'data: {"error": "boom"}\n\n'])),
            ErrorClass.STREAM_ERROR,
            "boom",
        ),
        (
            lambda _: httpx.Response(200, stream=Stream([])),
            ErrorClass.STREAM_ERROR,
            "no token chunk",
        ),
        (
            lambda _: httpx.Response(200, stream=Stream([events(CHAT_ROLE, DONE)])),
            ErrorClass.STREAM_ERROR,
            "no token chunk",
        ),
    ],
)
def test_failures_become_error_classes_never_exceptions(
    handler: Callable[[httpx.Request], httpx.Response], error: ErrorClass, detail: str
) -> None:
    _, outcome, _ = run(handler)
    assert outcome.error is error
    assert detail in outcome.detail


# vLLM 0.32 ends a failed generation with this event, then [DONE] (chat_completion/serving.py)
ENGINE_ERROR = (
    b'data: {"error": {"message": "Internal server error", "type": "InternalServerError", '
    b'"param": null, "code": 500}}'
)


def test_an_error_event_after_tokens_fails_the_request_though_done_follows() -> None:
    pieces = [events(chunk("a")), events(chunk("b")), events(ENGINE_ERROR, DONE)]
    meter, outcome, _ = run(lambda _: httpx.Response(200, stream=Stream(pieces)))
    assert outcome.error is ErrorClass.STREAM_ERROR
    assert outcome.detail == "Internal server error"
    assert (meter.chunk_count, meter.done) == (2, False)  # reading stopped at the error


def test_a_whole_answer_without_done_is_a_cut_stream() -> None:
    pieces = [events(chunk("a")), events(chunk("b"), chunk("c", "length"), USAGE)]
    meter, outcome, _ = run(lambda _: httpx.Response(200, stream=Stream(pieces)))
    assert outcome.error is ErrorClass.STREAM_CUT
    assert outcome.detail == "the stream ended without [DONE]"
    assert (meter.chunk_count, meter.output_tokens, meter.finish_reason) == (3, 3, "length")


def test_data_that_is_not_json_fails_the_request_after_tokens() -> None:
    pieces = [events(chunk("a")), b"data: {oops\n\n", events(DONE)]
    meter, outcome, _ = run(lambda _: httpx.Response(200, stream=Stream(pieces)))
    assert outcome.error is ErrorClass.STREAM_ERROR
    assert outcome.detail == "not JSON: b'{oops'"
    assert meter.chunk_count == 1
