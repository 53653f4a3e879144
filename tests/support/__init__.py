"""Helpers shared by tests and benches, each defined once: import them as `tests.support.<module>`.

tests/conftest.py puts the repository root on sys.path; benches run as modules from the root
(`.venv/bin/python -m bench.bench_tui`), where the root is on sys.path already. `tests` itself has
no __init__.py: with one, pytest's importlib mode would name test modules after the checkout's
folder (`main.tests.test_cli`) and import the root package a second time under that name.

- paths: the tests folder, the repository root, the captured /metrics files, the helper scripts.
- vllm_replica: the real vLLM CPU replica (start, restart, stop), streaming load, free_port.
- replica_procs: what is left in the process table below this test process.
- sim_replica: the simulated replica as a subprocess on a free port.
- tiny_model: the tiny Llama's config and tokenizer (a script run by the vLLM venv's Python).
- stub_replica: a replica command that can hang or ignore SIGTERM (a script run by path).
- fake_probe: a probe handle that records what it is told.
- lagged: probe records whose chunks arrived at known times and were stamped a known lag later.
- tui_fakes: frozen snapshots and poll results built from a real capture.
- tmux: a real terminal (a tmux session on a private socket), read and typed into.
- prometheus_server: a real Prometheus (Debian's package) on a free port, scraping given targets.
- sim_fleet: simulated replicas scraped by that Prometheus, for the fleet view.
- gauge_trace: a timed pattern of requests sent to a replica, its scheduler gauges read as they move.
"""
