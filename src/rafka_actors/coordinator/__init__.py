"""The group coordinator over every group type, above `classic_group/`, `consumer_group/` and
`share_group/`.

machine.py steps a group of any type (and changes a group's type when Kafka does), apply.py
is every record's change to a group (live, through `Effects.write`, and at start-up, where
`replay` folds a group's records through it), latest.py is the compacted view of every
group's records the coordinator log keeps. Pure: no trio, no I/O; the actors (`actors/`)
drive it.
"""
