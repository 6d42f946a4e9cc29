"""What every group type shares, beneath both state machines.

The classic protocol (`classic_group/`) and KIP-848 consumer groups (`consumer_group/`) each
import this package and never each other. It holds the coordinator's vocabulary: the mailbox
ops and their responses (ops.py), what a step is given and produces (effects.py: Effects,
GroupConfig, the telemetry events), the records every group type writes and the change each
makes (records.py: the `Record` base, offset records and the group tombstone; txn_offsets.py:
transactional offsets), committed offsets and the commit, fetch, delete and expiry steps both
protocols apply to them (offsets.py), and the topic snapshot a step may read
(topic_image.py). Pure: no trio, no I/O. What needs every group type (dispatching an op, the
apply of any record and replay, the compacted view of records) lives above, in
`coordinator/`.
"""
