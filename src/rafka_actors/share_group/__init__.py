"""KIP-932 share groups: membership by heartbeat and the delivery state of share partitions.

Pure, like group/ and consumer_group/: no trio, no I/O. coordinator/machine.py dispatches a
share group's ops here; the group's actor stores the records it returns before it answers.
"""
