"""Marks for the transaction tests that need the other two parts of issue 43.

The transaction coordinator (issue 43 §1) is tested on its own; a test that also needs the
data plane's control batches and read_committed (§3) or the group coordinator's
TxnOffsetCommit (§2) is an expected failure, not run, until that part is on this branch."""

from __future__ import annotations

import pytest

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.storage.data_plane import DataPlane

TXN_OFFSET_COMMIT = 28

HAS_DATA_PLANE = hasattr(DataPlane, "write_txn_markers")
HAS_TXN_OFFSETS = TXN_OFFSET_COMMIT in API_TABLE

needs_data_plane = pytest.mark.xfail(
    not HAS_DATA_PLANE,
    reason="needs issue 43 §3 (txndata: transactional batches, COMMIT/ABORT control batches, "
    "read_committed), not on this branch yet",
    run=False,
)
needs_txn_offsets = pytest.mark.xfail(
    not HAS_TXN_OFFSETS,
    reason="needs issue 43 §2 (txnoffsets: TxnOffsetCommit and transactional offsets in the "
    "group coordinator), not on this branch yet",
    run=False,
)
