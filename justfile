# rafka-actors tasks. `just --list` shows them.

venv := ".venv"
python := venv / "bin/python"

# Create the virtual environment and install the project with its dev tools.
install:
    test -x {{python}} || python3 -m venv {{venv}}
    {{python}} -m pip install -q -e '.[dev]'

# Run the broker on its embedded defaults (127.0.0.1:9092, ./rafka-data).
serve *ARGS:
    {{venv}}/bin/rafka-actors serve {{ARGS}}

# The whole test suite (what CI runs).
test *ARGS:
    {{venv}}/bin/pytest {{ARGS}}

# Long soak tests only.
test-slow *ARGS:
    {{venv}}/bin/pytest -m slow {{ARGS}}

# ruff and mypy.
lint:
    {{venv}}/bin/ruff check src tests
    {{venv}}/bin/mypy

# Benchmarks (see bench/).
bench *ARGS:
    {{python}} bench/quick.py {{ARGS}}
