"""Which range of a compacted partition is cleanable, and when (Kafka's LogCleanerManager)."""

from __future__ import annotations

from rafka_actors.storage.cleaner_plan import Cleanable, CleanerSettings, SegmentStat, cleanable

NOW = 1_800_000_000_000
LONG_MAX = 2**63 - 1


def settings(ratio: float = 0.5, min_lag: int = 0, max_lag: int = LONG_MAX) -> CleanerSettings:
    return CleanerSettings(ratio, min_lag, max_lag, 86_400_000)


# Four segments of 100 bytes: [0,10) [10,20) [20,30) and the active [30,35).
SEGMENTS = [
    SegmentStat(0, 10, 100, NOW - 9_000, NOW - 10_000),
    SegmentStat(10, 20, 100, NOW - 7_000, NOW - 8_000),
    SegmentStat(20, 30, 100, NOW - 5_000, NOW - 6_000),
    SegmentStat(30, 35, 100, NOW - 1_000, NOW - 2_000),
]


def plan(checkpoint: int | None = None, lso: int = 35, **kwargs: int | float) -> Cleanable | None:
    return cleanable(
        SEGMENTS,
        log_start=0,
        log_end=35,
        last_stable=lso,
        checkpoint=checkpoint,
        settings=settings(**kwargs),
        now_ms=NOW,
    )


def test_a_never_cleaned_log_is_all_dirty_up_to_the_active_segment() -> None:
    found = plan()
    assert found is not None
    assert (found.first_dirty, found.upper_bound) == (0, 30)
    assert found.ratio == 1.0


def test_the_dirty_ratio_must_exceed_the_minimum() -> None:
    found = plan(checkpoint=20, ratio=0.3)  # 100 dirty bytes of 300
    assert found is not None and abs(found.ratio - 1 / 3) < 1e-9
    assert plan(checkpoint=20) is None  # (0.5, Kafka's default)
    assert plan(checkpoint=30) is None  # nothing sealed is dirty


def test_a_checkpoint_outside_the_log_counts_as_none() -> None:
    assert plan(checkpoint=99).first_dirty == 0


def test_never_past_the_last_stable_offset_rounded_to_its_segment() -> None:
    found = plan(lso=25)
    assert found.upper_bound == 20
    assert plan(lso=5) is None  # an open transaction in the first segment: nothing to clean


def test_min_compaction_lag_holds_back_recent_segments() -> None:
    assert plan(min_lag=6_000).upper_bound == 20
    assert plan(min_lag=10_000) is None


def test_max_compaction_lag_forces_a_clean_below_the_ratio() -> None:
    assert plan(checkpoint=20, ratio=0.9) is None
    forced = plan(checkpoint=20, ratio=0.9, max_lag=5_000)
    assert forced is not None and forced.overdue
    assert plan(checkpoint=20, ratio=0.9, max_lag=7_000) is None  # not old enough yet
