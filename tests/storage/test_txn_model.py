"""Random interleavings of producers' batches (plain and transactional) and COMMIT/ABORT
markers on a real data plane, against a model: a read_committed reader that filters with
the returned aborted transactions, as Kafka's consumer does, sees exactly the records of
committed transactions and of plain batches below the last stable offset; and reopening the
data dir rebuilds the same producer state from the log, after an unclean stop (a full
replay) and after a clean one (its snapshot)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from rafka_actors.storage.control_batches import ABORT, read_marker
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.producer_state import PartitionProducers
from rafka_actors.storage.record_batch import HEADER_SIZE, parse_header, split_batches

from ..batch_builder import build_batch, decode_batches

TXN = 0x10
PIDS = 3

ops = st.lists(
    st.one_of(
        st.tuples(st.just("data"), st.integers(0, PIDS - 1), st.booleans(), st.integers(1, 3)),
        st.tuples(st.just("end"), st.integers(0, PIDS - 1), st.booleans(), st.just(0)),
    ),
    max_size=25,
)


def committed_view(blob: bytes, aborted: list[tuple[int, int]]) -> list[bytes]:
    """What a read_committed client keeps of a Fetch answer (Kafka's consumer algorithm)."""
    pending = sorted(aborted, key=lambda t: t[1])
    aborting: set[int] = set()
    kept: list[bytes] = []
    pos = 0
    while pos < len(blob):
        header = parse_header(blob, pos)
        end = pos + header.size
        if header.producer_id >= 0:  # as the Java consumer: markers consume the list too
            while pending and pending[0][1] <= header.last_offset:
                aborting.add(pending.pop(0)[0])
        if header.is_control:
            marker = read_marker(bytes(blob[pos + HEADER_SIZE : end]))
            if marker is not None and marker[0] == ABORT:
                aborting.discard(header.producer_id)
        if not header.is_control and not (
            header.is_transactional and header.producer_id in aborting
        ):
            kept += [r.value or b"" for r in decode_batches(blob[pos:end])]
        pos = end
    return kept


def state_of(producers: PartitionProducers) -> object:
    entries = {
        pid: (e.epoch, list(e.batches), e.coordinator_epoch, e.txn_first_offset)
        for pid, e in producers.entries.items()
    }
    return entries, producers.open_transactions(), producers.aborted_between(0, 1 << 62)


@settings(max_examples=40, deadline=None)
@given(ops, st.sampled_from([1, 150, 400, 1 << 20]))
def test_read_committed_matches_the_model_and_survives_reopening(
    steps: list[tuple[str, int, bool, int]], fetch_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data = DataPlane.open(Path(tmp), segment_bytes=600)  # several segments
        topic = data.create_topic("t", 1)
        seqs = [0] * PIDS
        open_values: dict[int, list[tuple[int, bytes]]] = {pid: [] for pid in range(PIDS)}
        visible: list[tuple[int, bytes]] = []  # (offset, value) of committed or plain records
        counter = 0
        for kind, pid, flag, n in steps:
            if kind == "data":
                txn = flag
                values = [b"%d-%d" % (pid, counter + i) for i in range(n)]
                counter += n
                raw = build_batch(
                    [(None, v) for v in values],
                    producer_id=pid,
                    producer_epoch=0,
                    base_sequence=seqs[pid],
                    attributes=TXN if txn else 0,
                )
                result = data.append(topic, 0, split_batches(raw))
                if not txn and open_values[pid]:
                    assert result.error is ErrorCode.invalid_txn_state
                    continue
                assert result.error is ErrorCode.none
                seqs[pid] += n
                placed = [(result.base_offset + i, v) for i, v in enumerate(values)]
                (open_values[pid] if txn else visible).extend(placed)
            else:
                codes = trio.run(data.write_txn_markers, 0, pid, 0, flag, [("t", 0)])
                assert codes == {("t", 0): 0}
                if flag:
                    visible.extend(open_values[pid])
                open_values[pid] = []
        lso = data.last_stable_offset(topic, 0)
        firsts = [vs[0][0] for vs in open_values.values() if vs]
        assert lso == min(firsts, default=topic.partitions[0].log_end_offset)
        expected = [v for offset, v in sorted(visible) if offset < lso]

        def read(plane: DataPlane) -> list[bytes]:
            t = plane.topics.by_name("t")
            assert t is not None
            got: list[bytes] = []
            offset = 0
            while True:  # reads of any size: the aborted list must be right for every range
                blob, aborted, _ = plane.read_committed(t, 0, offset, fetch_bytes)
                if not blob:
                    return got
                got += committed_view(blob, [(a.producer_id, a.first_offset) for a in aborted])
                last = parse_header(blob, 0)
                pos = 0
                while pos + last.size < len(blob):
                    pos += last.size
                    last = parse_header(blob, pos)
                offset = last.last_offset + 1

        assert read(data) == expected
        before = state_of(data._producers_of((topic.topic_id, 0), topic.partitions[0]))
        again = DataPlane.open(Path(tmp), segment_bytes=600)  # no close: as after a SIGKILL
        t2 = again.topics.by_name("t")
        assert t2 is not None
        assert state_of(again._producers_of((t2.topic_id, 0), t2.partitions[0])) == before
        assert again.last_stable_offset(t2, 0) == lso
        assert read(again) == expected
        data.close()
        again.close()  # a clean shutdown: the next start-up begins from its snapshot
        third = DataPlane.open(Path(tmp), segment_bytes=600)
        t3 = third.topics.by_name("t")
        assert t3 is not None
        assert state_of(third._producers_of((t3.topic_id, 0), t3.partitions[0])) == before
        assert read(third) == expected
        third.close()
