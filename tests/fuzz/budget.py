"""How long the fuzzers run, and a count of what they ran.

Every fuzz test runs `examples()` hypothesis examples: a small number by default, so the whole
of tests/fuzz stays well under a minute in CI, and as many as `RAFKA_FUZZ_EXAMPLES` says for a
longer campaign (`RAFKA_FUZZ_EXAMPLES=100000 pytest tests/fuzz --timeout 0`: past the suite's
120 s per-test limit). `COUNTS` counts the inputs
that were actually executed (frames decoded, frames sent, ops handled ...); conftest.py prints
it at the end of the session so the figures can go into docs/fuzzing.md.
"""

from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, settings

COUNTS: Counter[str] = Counter()


def examples(default: int) -> int:
    value = os.environ.get("RAFKA_FUZZ_EXAMPLES")
    return int(value) if value else default


def fuzz_settings(default: int, deadline_ms: int | None = 5000) -> settings:
    return settings(
        max_examples=examples(default),
        deadline=deadline_ms,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
        database=None,
        derandomize=False,
        print_blob=True,
    )
