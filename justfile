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

# The whole test suite (what CI runs), on four xdist workers.
test *ARGS:
    {{venv}}/bin/pytest -n 4 {{ARGS}}

# librdkafka's own integration tests against the broker, one per test-runner and broker
# (bench/librdkafka_suite.py; DIR: a librdkafka checkout, built if needed; docs/librdkafka-suite.md).
test-librdkafka DIR *ARGS:
    {{python}} bench/librdkafka_suite.py --librdkafka {{DIR}} {{ARGS}}

# Long soak tests only.
test-slow *ARGS:
    {{venv}}/bin/pytest -m slow {{ARGS}}

# The tests of bench/ (the harness and its scripts): slowish, so not in `just test`.
test-bench *ARGS:
    {{venv}}/bin/pytest -m bench {{ARGS}}

# The differential check against Apache Kafka 4.3.1 (the Kafka peer and Java 17): the same
# scenarios against both brokers; prints every difference, and fails on one that
# docs/kafka-differences.md does not list (or lists as fixed), or on a listed one gone.
test-kafka *ARGS:
    {{venv}}/bin/pytest -m kafka tests/kafka_diff {{ARGS}}

# ruff and mypy.
lint:
    {{venv}}/bin/ruff check src tests bench examples
    {{venv}}/bin/ruff format --check src tests bench examples
    {{venv}}/bin/mypy

# The benchmark against peer brokers: workloads (a)-(h), one table (docs/performance.md).
# Another installation takes part as NAME=rafka-actors@PYTHON in --brokers (bench/run.py --help).
bench *ARGS:
    {{python}} bench/run.py {{ARGS}}

# The group-size chart of docs/performance.md.
bench-chart *ARGS:
    {{python}} bench/group_size.py --runs 3 --png docs/perf-group-size.png {{ARGS}}

# Where the broker's CPU goes per request, by part (py-spy; bench/profile_broker.py).
bench-profile *ARGS:
    {{python}} bench/profile_broker.py {{ARGS}}

# 16 committers on one broker against 8 + 8 on two: what a second process could give.
bench-split *ARGS:
    {{python}} bench/split_brokers.py {{ARGS}}

# Data-plane and quick group figures through confluent-kafka (bench/quick.py).
bench-quick *ARGS:
    {{python}} bench/quick.py {{ARGS}}
