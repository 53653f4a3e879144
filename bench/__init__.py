"""Benchmarks that print figures (timing belongs here, not in pass/fail tests).

Run each as a module from the repository root with the dev venv, e.g.
`.venv/bin/python -m bench.bench_tui --help`: the root is then on sys.path, so the helpers the
tests use import as `tests.support.<module>`, the same as in the tests.
"""
