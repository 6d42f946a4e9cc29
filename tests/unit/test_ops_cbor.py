"""Every mailbox op and response survives the CBOR rail unchanged (design note 000)."""

from __future__ import annotations

import dataclasses
import typing
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.group_common import ops

OP_TYPES = list(ops.OP_CODES)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is str:
        return st.text(max_size=8)
    if tp is int:
        return st.integers(-(2**31), 2**31 - 1)
    if tp is bool:
        return st.booleans()
    if tp is bytes:
        return st.binary(max_size=16)
    if tp is type(None):
        return st.none()
    if tp is uuid.UUID:
        return st.uuids()
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(_strategy(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(_strategy(a) for a in args))
    if origin in (typing.Union, __import__("types").UnionType):
        return st.one_of(*(_strategy(a) for a in args))
    raise TypeError(tp)


def _op_strategy(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{f.name: _strategy(hints[f.name]) for f in dataclasses.fields(cls)})


@settings(max_examples=300)
@given(st.one_of(*(_op_strategy(cls) for cls in OP_TYPES)))
def test_cbor_round_trip(op: Any) -> None:
    assert ops.decode_op(ops.encode_op(op)) == op


def test_design_note_op_codes() -> None:
    assert [
        ops.OP_CODES[c]
        for c in (
            ops.JoinGroupOp,
            ops.SyncGroupOp,
            ops.HeartbeatOp,
            ops.LeaveGroupOp,
            ops.OffsetCommitOp,
            ops.OffsetFetchOp,
        )
    ] == list(range(6, 12))


def test_a_commit_op_defaults_to_no_member_and_no_generation() -> None:
    op = ops.OffsetCommitOp("g", ())
    assert (op.member_id, op.generation_id, op.group_instance_id, op.api_version) == (
        ops.UNKNOWN_MEMBER,
        ops.NO_GENERATION,
        None,
        9,
    )


def test_a_fetch_op_defaults_to_no_member_and_an_unstable_read() -> None:
    op = ops.OffsetFetchOp("g", None)
    assert (op.require_stable, op.member_id, op.member_epoch) == (False, None, -1)
    assert ops.OffsetFetchOpResp(0).offsets == ()  # the response's default: no offsets
    assert ops.decode_op(ops.encode_op(ops.OffsetFetchOp("g", (("t", 0),), True, "m", 3))) == (
        ops.OffsetFetchOp("g", (("t", 0),), require_stable=True, member_id="m", member_epoch=3)
    )


def test_a_heartbeat_op_defaults_to_no_instance_id() -> None:
    assert ops.HeartbeatOp("g", "m", 3).group_instance_id is None
    op = ops.HeartbeatOp("g", "m", 3, "i")
    assert ops.decode_op(ops.encode_op(op)) == op
    assert ops.HeartbeatOpResp(0) == ops.HeartbeatOpResp(error_code=0)
