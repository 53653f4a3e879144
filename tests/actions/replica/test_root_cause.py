"""The error a failed start's log names, past the wrapper that points above itself."""

from __future__ import annotations

from slotop.actions.replica.process import root_cause

ENGINE_REFUSED = """\
(APIServer pid=101) INFO 12-02 05:08:48 [api_server.py:1] vLLM API server version 0.32.0
(EngineCore pid=102) ERROR 12-02 05:08:57 [core.py:1510] EngineCore failed to start.
(EngineCore pid=102) ERROR 12-02 05:08:57 [core.py:1510] Traceback (most recent call last):
(EngineCore pid=102) ERROR 12-02 05:08:57 [core.py:1510]     raise NotImplementedError(
(EngineCore pid=102) ERROR 12-02 05:08:57 [core.py:1510] NotImplementedError: FP8 KV cache on CPU \
requires x86 with AVX-512 or AMX.
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
    raise NotImplementedError(
NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.
Traceback (most recent call last):
    raise RuntimeError(
RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}
"""


def test_the_engine_s_own_reason_is_found_above_its_wrapper() -> None:
    assert root_cause(ENGINE_REFUSED) == (
        "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX."
    )


def test_the_last_error_is_the_one_named() -> None:
    log = "ValueError: first\nsome line\nOSError: [Errno 98] Address already in use\n"
    assert root_cause(log) == "OSError: [Errno 98] Address already in use"


def test_a_log_without_an_error_names_none() -> None:
    assert root_cause("INFO starting\nINFO loading weights\n") is None
    assert root_cause("") is None
    # a word ending in Error without a message is not an error line
    assert root_cause("retrying after a ConnectionError\n") is None
