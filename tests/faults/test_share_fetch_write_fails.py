"""Fault: the coordinator log refuses the one append of a ShareFetch that acknowledges and
acquires in one turn (issue 52 §5): the piggy-backed acknowledgements and the acquisition
are stored together, so they fail together.

Guarantee: the fetch is answered NOT_COORDINATOR (retriable) with nothing handed out; the
acknowledgement it carried is not applied (its client was not told it was), so those records
come back, once more delivered; the acquisition raised no count; other groups carry on.
"""

from __future__ import annotations

import trio
import trio.testing

from rafka_actors.share_group.ops import ShareFetchOp, ShareFetchOpResp
from rafka_actors.storage.share_reads import ReadFrom, ShareReads

from .helpers import (
    ACCEPT,
    LOG_END,
    NOT_COORDINATOR,
    OK,
    SHARE_CONFIG,
    SHARE_TOPICS,
    FailingLog,
    commit_error,
    commit_op,
    key,
    running_registry,
    share_join,
)


def read_t0(_org: int, read_from: ReadFrom, _max_bytes: int, _committed: bool) -> ShareReads:
    """A log of LOG_END records on t-0, read from where the machine said."""
    reads = tuple(
        (topic, index, 0, LOG_END, max(offset, 0), LOG_END - 1 if offset >= 0 else -1)
        for topic, index, offset in read_from
    )
    return ShareReads(reads, (), tuple((t, i, b"") for t, i, *_ in reads))


def fetch(member: str, epoch: int, acks: tuple = (), max_records: int = 5) -> ShareFetchOp:
    opening = epoch == 0
    return ShareFetchOp(
        "s",
        member,
        epoch,
        added=(("t", 0),) if opening else (),
        acks=acks,
        log_bounds=(("t", 0, 0, LOG_END),) if opening else (),
        max_records=max_records,
    )


def runs(answer: ShareFetchOpResp) -> list[tuple[int, int, int]]:
    assert answer.error_code == OK, answer
    return [run for _topic, _partition, got in answer.acquired for run in got]


async def test_a_refused_fetch_stores_neither_its_acks_nor_its_acquisition(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log = FailingLog()
    s, other = key("s"), key("other")
    async with running_registry(
        log, SHARE_CONFIG, topics=lambda _org: SHARE_TOPICS, read_share=read_t0
    ) as registry:
        assert (await registry.ask(s, share_join("s", "a"))).error_code == OK
        assert runs(await registry.ask(s, fetch("a", 0))) == [(0, 4, 1)]

        log.failing = {"s"}
        acks = (("t", 0, 0, 4, (ACCEPT,)),)
        refused = await registry.ask(s, fetch("a", 1, acks))
        assert (refused.error_code, refused.acquired) == (NOT_COORDINATOR, ())
        assert commit_error(await registry.ask(other, commit_op("other", 0, 3))) == OK
        log.failing = set()

        # rebuilt from the log: a joins again; 0-4 were never acknowledged, 5-9 never handed out
        assert (await registry.ask(s, share_join("s", "a"))).error_code == OK
        again = await registry.ask(s, fetch("a", 0, max_records=10))
        assert runs(again) == [(0, 4, 2), (5, 9, 1)]
        assert again.ack_errors == ()
