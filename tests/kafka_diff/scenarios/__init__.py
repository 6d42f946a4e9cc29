"""The scenarios, registered in `probe.SCENARIOS` as their modules are imported."""

from . import classic, consumer, offsets, tools, topics, transactions

__all__ = ["classic", "consumer", "offsets", "tools", "topics", "transactions"]
