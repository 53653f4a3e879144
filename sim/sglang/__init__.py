"""The simulated replica speaking SGLang 0.5.23: its flags, sizing, /metrics, endpoints and streams.

`slotop sim --engine sglang` runs the same engine model as the vLLM mode, configured and exposed
the way `python -m sglang.launch_server ... --enable-metrics` is.
"""
