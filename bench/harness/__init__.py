"""The benchmark harness (a dev-only package, not in the wheel): workloads driven by real
clients and by a direct protocol load generator against any broker, and a runner that starts
rafka-actors and its peers and prints one table of figures and ratios from one run. See
docs/performance.md.

It lives in `bench/harness/` and is imported as `harness`: the scripts of `bench/` run as
`.venv/bin/python bench/<script>.py`, which puts `bench/` first on `sys.path`, and pytest gets
the same from `pythonpath` in pyproject.toml. It imports `rafka_actors` (the editable install
of the dev venv) for the admin client and the wire codec.
"""
