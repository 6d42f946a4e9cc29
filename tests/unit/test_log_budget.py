"""LogBudget: the first lines of an interval are written, the rest counted and reported."""

from __future__ import annotations

import logging

import pytest

from rafka_actors import log_budget
from rafka_actors.log_budget import LogBudget


def test_lines_beyond_the_budget_are_counted_then_reported(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(log_budget.time, "monotonic", lambda: now[0])
    budget = LogBudget(logging.getLogger("t"), per_interval=2, interval_s=10)
    for i in range(5):
        budget.warning("closing %d", i)
    assert [r.getMessage() for r in caplog.records] == ["closing 0", "closing 1"]
    now[0] += 10
    budget.warning("closing %d", 5)
    assert [r.getMessage() for r in caplog.records][2:] == [
        "3 more such lines were not logged in 10s",
        "closing 5",
    ]


def test_the_count_of_an_ended_interval_is_flushed_without_another_line(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [100.0]
    monkeypatch.setattr(log_budget.time, "monotonic", lambda: now[0])
    budget = LogBudget(logging.getLogger("t"), per_interval=1, interval_s=10)
    for i in range(4):
        budget.warning("refused %d", i)
    log_budget.flush_all()  # the interval has not ended: nothing yet
    assert [r.getMessage() for r in caplog.records] == ["refused 0"]
    now[0] += 10
    log_budget.flush_all()
    log_budget.flush_all()  # reported once
    assert [r.getMessage() for r in caplog.records] == [
        "refused 0",
        "3 more such lines were not logged in 10s",
    ]
