"""Burrow's evaluation rules on plain (time ms, offset, lag) lists: a specification by example."""

from __future__ import annotations

import pytest

from rafka_actors.pipeline.burrow import Commit, Status, collapse, evaluate, group_status

S = 1_000  # a commit every second below; "now" is given per case


def commits(offsets: list[int], lags: list[int], start: int = 0) -> list[tuple[int, int, int]]:
    return [(start + i * S, o, lag) for i, (o, lag) in enumerate(zip(offsets, lags, strict=True))]


def status(points: list[tuple[int, int, int]], now: int | None = None, **kw: int) -> Status:
    now = points[-1][0] if now is None else now
    return evaluate(points, now_ms=now, **kw).status


def test_ok_when_the_lag_was_zero_at_any_commit_of_the_window() -> None:
    # offsets went backwards too, but catching up once wins (rule 1 comes first)
    assert status(commits([10, 20, 5, 30], [3, 0, 9, 4])) is Status.OK


def test_ok_when_the_current_lag_is_zero() -> None:
    points = commits([10, 10, 10], [5, 5, 5])
    assert evaluate(points, now_ms=2 * S, log_end_offset=10).status is Status.OK
    assert evaluate(points, now_ms=2 * S, log_end_offset=12).status is Status.STALL


def test_rewind_when_an_offset_goes_backwards() -> None:
    assert status(commits([10, 20, 15, 25], [1, 2, 9, 8])) is Status.REWIND


def test_rewind_is_worse_than_stop() -> None:
    assert status(commits([10, 20, 15], [1, 2, 9]), now=60 * S) is Status.REWIND


def test_stop_when_the_last_commit_is_older_than_the_window_is_long() -> None:
    points = commits([10, 20, 30], [1, 2, 3])  # spans 2 s
    assert status(points, now=4 * S) is Status.WARN  # 2 s since the last: not yet
    assert status(points, now=4 * S + 1) is Status.STOP


def test_stall_when_the_offset_never_moves_while_there_is_lag() -> None:
    assert status(commits([7, 7, 7, 7], [3, 5, 9, 2])) is Status.STALL


def test_warn_when_offsets_move_but_the_lag_never_shrinks() -> None:
    assert status(commits([10, 20, 30, 40], [5, 5, 6, 9])) is Status.WARN


def test_ok_when_the_lag_shrinks_somewhere() -> None:
    assert status(commits([10, 20, 30, 40], [5, 8, 6, 9])) is Status.OK


def test_the_window_is_the_latest_commits() -> None:
    # an old rewind falls out of a window of 3
    points = commits([10, 5, 20, 30, 40], [1, 9, 8, 7, 6])
    verdict = evaluate(points, now_ms=4 * S, window=3)
    assert verdict.window == (Commit(2 * S, 20, 8), Commit(3 * S, 30, 7), Commit(4 * S, 40, 6))
    assert verdict.status is Status.OK and verdict.complete == 1.0
    assert evaluate(points, now_ms=4 * S, window=5).status is Status.REWIND


def test_min_distance_replaces_close_commits_keeping_the_first_time() -> None:
    points = [(0, 10, 1), (400, 11, 2), (900, 12, 3), (1_000, 13, 4), (2_500, 14, 5)]
    assert collapse(points, 1_000) == [(0, 12, 3), (1_000, 13, 4), (2_500, 14, 5)]
    assert collapse(points, 0) == points


def test_a_fast_committer_still_fills_the_window_over_time() -> None:
    # commits every 100 ms with min distance 1 s: one kept commit per second
    points = [(i * 100, i, 5) for i in range(35)]
    kept = evaluate(points, now_ms=3_400, min_distance_ms=1_000).window
    assert [c.time_ms for c in kept] == [0, 1_000, 2_000, 3_000]
    assert [c.offset for c in kept] == [9, 19, 29, 34]


def test_allowed_lag_counts_as_caught_up() -> None:
    points = commits([10, 20, 30], [2, 3, 4])
    assert status(points) is Status.WARN
    assert status(points, allowed_lag=2) is Status.OK
    assert evaluate(points, now_ms=2 * S, log_end_offset=33, allowed_lag=3).status is Status.OK


def test_one_commit_with_lag_is_stop_once_time_passes_else_stall() -> None:
    # Burrow's literal reading of a window of one, kept on purpose
    assert status([(0, 10, 5)], now=1) is Status.STOP
    assert status([(0, 10, 5)], now=0) is Status.STALL


def test_no_commits_is_ok_and_empty() -> None:
    verdict = evaluate([], now_ms=0)
    assert (verdict.status, verdict.window, verdict.complete) == (Status.OK, (), 0.0)


def test_current_lag_is_the_log_end_now_minus_the_last_offset() -> None:
    points = commits([10, 20], [4, 4])
    assert evaluate(points, now_ms=S, log_end_offset=50).current_lag == 30
    assert evaluate(points, now_ms=S, log_end_offset=15).current_lag == 0  # never negative
    assert evaluate(points, now_ms=S).current_lag == 4  # without a log end: the last lag


def test_current_lag_of_an_offset_below_the_log_start_counts_from_the_log_start() -> None:
    points = [(1 * S, 10, 4), (2 * S, 20, 2)]
    assert evaluate(points, now_ms=S, log_end_offset=50, log_start_offset=35).current_lag == 15
    assert evaluate(points, now_ms=S, log_end_offset=50, log_start_offset=5).current_lag == 30


def test_a_window_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="window"):
        evaluate([], now_ms=0, window=0)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], Status.OK),
        ([Status.OK, Status.OK], Status.OK),
        ([Status.OK, Status.WARN], Status.WARN),
        ([Status.WARN, Status.STOP], Status.ERR),
        ([Status.STALL], Status.ERR),
        ([Status.OK, Status.REWIND, Status.WARN], Status.ERR),
    ],
)
def test_group_status_is_the_worst_with_errors_as_err(
    statuses: list[Status], expected: Status
) -> None:
    assert group_status(statuses) is expected
