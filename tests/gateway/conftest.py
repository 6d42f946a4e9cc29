"""Fixtures shared by the gateway tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def passivate_after_s() -> float:
    """How long an idle group's actor stays in the reactor tests' brokers (test_reactor.py's
    `ctx`): 0, dropped once it answered. test_fetch_repeat.py keeps the broker's default."""
    return 0.0
