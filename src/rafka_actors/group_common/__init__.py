"""What every group type shares, beneath both state machines.

The classic protocol (`group/`) and KIP-848 consumer groups (`consumer_group/`) each import
this package and never each other. It holds the coordinator's vocabulary: the mailbox ops and
their responses (ops.py), what a step is given and produces (effects.py: Effects, GroupConfig,
the telemetry events), the records every group type writes (records.py: the `Record` base,
offset records and the group tombstone), committed offsets and the commit, fetch, delete and
expiry steps both protocols apply to them (offsets.py), and the topic snapshot a step may read
(topic_image.py). Pure: no trio, no I/O. What needs both group types (dispatching an op,
replay, the live view of records) lives above, in `coordinator/`.
"""
