"""An error answer of the right shape for any group op (used when an actor fails or stops)."""

from __future__ import annotations

from typing import Any

from ..group_common import ops


def error_response(op: Any, code: int) -> Any:
    match op:
        case ops.JoinGroupOp():
            return ops.JoinGroupOpResp(code, member_id=op.member_id)
        case ops.SyncGroupOp():
            return ops.SyncGroupOpResp(code)
        case ops.HeartbeatOp():
            return ops.HeartbeatOpResp(code)
        case ops.LeaveGroupOp():
            return ops.LeaveGroupOpResp(code)
        case ops.OffsetCommitOp():
            return ops.OffsetCommitOpResp(tuple((t, p, code) for t, p, *_ in op.offsets))
        case ops.OffsetFetchOp():
            return ops.OffsetFetchOpResp(code)
        case ops.DescribeGroupOp():
            return ops.DescribeGroupOpResp(code, "Dead")
        case ops.DeleteGroupOp():
            return ops.DeleteGroupOpResp(code)
        case ops.OffsetDeleteOp():
            return ops.OffsetDeleteOpResp(code)
        case ops.ExpireOffsetsOp():
            return ops.ExpireOffsetsOpResp(0, False)
        case ops.ConsumerGroupHeartbeatOp():
            return ops.ConsumerGroupHeartbeatOpResp(code)
        case ops.ConsumerGroupDescribeOp():
            return ops.ConsumerGroupDescribeOpResp(code)
        case ops.TxnOffsetCommitOp():
            return ops.TxnOffsetCommitOpResp(tuple((t, p, code) for t, p, *_ in op.offsets))
        case ops.TxnMarkerOp():
            return ops.TxnMarkerOpResp(code)
        case ops.GroupConfigOp():
            return ops.GroupConfigOpResp(code)
        case ops.TopicsChangedOp():
            return ops.TopicsChangedOpResp(code)
        case ops.ShareGroupHeartbeatOp():
            return ops.ShareGroupHeartbeatOpResp(code)
        case ops.ShareGroupDescribeOp():
            return ops.ShareGroupDescribeOpResp(code)
        case ops.ShareSessionOp():
            return ops.ShareSessionOpResp(code)
        case ops.ShareAcquireOp():
            return ops.ShareAcquireOpResp(code)
        case ops.DescribeShareOffsetsOp():
            return ops.DescribeShareOffsetsOpResp(code)
        case ops.AlterShareOffsetsOp():
            return ops.AlterShareOffsetsOpResp(code)
        case ops.DeleteShareOffsetsOp():
            return ops.DeleteShareOffsetsOpResp(code)
    raise TypeError(f"no error response for {type(op).__name__}")
