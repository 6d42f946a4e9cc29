"""The group coordinator over every group type, above `group/` and `consumer_group/`.

machine.py steps a group of either type (and changes a group's type when Kafka does),
replay.py rebuilds a group of either type from its records, latest.py keeps the live view
of every group's records. Pure: no trio, no I/O; the actors (`actors/`) drive it.
"""
