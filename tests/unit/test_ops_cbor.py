"""Every mailbox op and response survives the CBOR rail unchanged (design note 000): ops are
frozen dataclasses of plain values, so `[op_code, *fields]` carries each, the rail a separate
gateway process would speak. The broker itself passes ops in memory: the codec is the test's."""

from __future__ import annotations

import dataclasses
import typing
import uuid
from typing import Any

import cbor2
from hypothesis import given, settings
from hypothesis import strategies as st

from rafka_actors.consumer_group import ops as consumer_ops
from rafka_actors.group_common import ops
from rafka_actors.share_group import ops as share_ops

OP_CODES: dict[type, int] = {
    ops.JoinGroupOp: 0x06,
    ops.SyncGroupOp: 0x07,
    ops.HeartbeatOp: 0x08,
    ops.LeaveGroupOp: 0x09,
    ops.OffsetCommitOp: 0x0A,
    ops.OffsetFetchOp: 0x0B,
    ops.DescribeGroupOp: 0x0C,
    ops.DeleteGroupOp: 0x0D,
    ops.OffsetDeleteOp: 0x0E,
    ops.TimerFired: 0x0F,
    ops.ExpireOffsetsOp: 0x10,
    consumer_ops.ConsumerGroupHeartbeatOp: 0x11,
    consumer_ops.ConsumerGroupDescribeOp: 0x12,
    ops.TxnMarkerOp: 0x21,
    ops.GroupConfigOp: 0x30,
    ops.TopicsChangedOp: 0x31,
    # KIP-932 share groups
    share_ops.ShareGroupHeartbeatOp: 0x28,
    share_ops.ShareGroupDescribeOp: 0x29,
    share_ops.ShareSessionOp: 0x2A,
    share_ops.ShareAcquireOp: 0x2B,
    share_ops.DescribeShareOffsetsOp: 0x2C,
    share_ops.AlterShareOffsetsOp: 0x2D,
    share_ops.DeleteShareOffsetsOp: 0x2E,
    share_ops.ShareFetchOp: 0x2F,
    # responses: the request's code with the high bit set
    ops.JoinGroupOpResp: 0x86,
    ops.SyncGroupOpResp: 0x87,
    ops.HeartbeatOpResp: 0x88,
    ops.LeaveGroupOpResp: 0x89,
    ops.OffsetCommitOpResp: 0x8A,
    ops.OffsetFetchOpResp: 0x8B,
    ops.DescribeGroupOpResp: 0x8C,
    ops.DeleteGroupOpResp: 0x8D,
    ops.OffsetDeleteOpResp: 0x8E,
    ops.ExpireOffsetsOpResp: 0x90,
    consumer_ops.ConsumerGroupHeartbeatOpResp: 0x91,
    consumer_ops.ConsumerGroupDescribeOpResp: 0x92,
    ops.TxnMarkerOpResp: 0xA1,
    ops.GroupConfigOpResp: 0xB0,
    ops.TopicsChangedOpResp: 0xB1,
    share_ops.ShareGroupHeartbeatOpResp: 0xA8,
    share_ops.ShareGroupDescribeOpResp: 0xA9,
    share_ops.ShareSessionOpResp: 0xAA,
    share_ops.ShareAcquireOpResp: 0xAB,
    share_ops.DescribeShareOffsetsOpResp: 0xAC,
    share_ops.AlterShareOffsetsOpResp: 0xAD,
    share_ops.DeleteShareOffsetsOpResp: 0xAE,
    share_ops.ShareFetchOpResp: 0xAF,
}
OP_CODES |= {ops.TxnOffsetCommitOp: 0x20, ops.TxnOffsetCommitOpResp: 0xA0}  # transactional offsets
_BY_CODE = {code: cls for cls, code in OP_CODES.items()}


def encode_op(op: Any) -> bytes:
    return cbor2.dumps([OP_CODES[type(op)], *dataclasses.astuple(op)])


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def decode_op(data: bytes) -> Any:
    code, *fields = cbor2.loads(data)
    return _BY_CODE[code](*(_tuplify(f) for f in fields))


OP_TYPES = list(OP_CODES)
REQUESTS = [cls for cls, code in OP_CODES.items() if code < 0x80 and cls is not ops.TimerFired]


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
    assert decode_op(encode_op(op)) == op


@settings(max_examples=200)
@given(st.one_of(*(_op_strategy(cls) for cls in REQUESTS)), st.sampled_from([15, 16, 69]))
def test_each_op_answers_an_error_in_its_own_response(op: Any, code: int) -> None:
    """`error_reply` (what an actor that fails answers) is the op's own response, carrying
    the code everywhere the response has one, and the message where it has a field for it."""
    reply = op.error_reply(code, "why")
    assert type(reply) is _BY_CODE[OP_CODES[type(op)] | 0x80]
    if hasattr(reply, "error_code"):
        assert reply.error_code == code
    assert all(error == code for *_, error in getattr(reply, "results", ()))
    assert getattr(reply, "error_message", "why") == "why"


def test_design_note_op_codes() -> None:
    assert [
        OP_CODES[c]
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
    assert decode_op(encode_op(ops.OffsetFetchOp("g", (("t", 0),), True, "m", 3))) == (
        ops.OffsetFetchOp("g", (("t", 0),), require_stable=True, member_id="m", member_epoch=3)
    )


def test_a_heartbeat_op_defaults_to_no_instance_id() -> None:
    assert ops.HeartbeatOp("g", "m", 3).group_instance_id is None
    op = ops.HeartbeatOp("g", "m", 3, "i")
    assert decode_op(encode_op(op)) == op
    assert ops.HeartbeatOpResp(0) == ops.HeartbeatOpResp(error_code=0)
