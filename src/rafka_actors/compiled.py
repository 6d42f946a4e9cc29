"""Which modules the optional compiled build compiles, and whether this process runs them.

`pip install .` (a wheel) compiles the modules every OffsetCommit, OffsetFetch and Heartbeat
passes through with mypyc (setup.py); an editable install, the tests' `pip install -e`, runs
them as the Python they are. The broker logs which one it runs at start-up. This module
imports nothing of the package: setup.py reads HOT_MODULES from it before anything is built.
"""

from __future__ import annotations

import importlib

# The gateway's request path (with the connection's socket, frame reader and idle clock, and
# the topic lookups of a commit), the group's actor and state machine, and the coordinator log.
# group.state is left out: mypyc cannot compile its exception subclass of RuntimeError.
HOT_MODULES = (
    "protocol.codec",
    "protocol.headers",
    "protocol.messages",
    "protocol.response_template",
    "gateway.connection",
    "gateway.frames",
    "gateway.idle",
    "gateway.idle_poll",
    "gateway.plain_socket",
    "gateway.reactor",
    "gateway.commit_repeat",
    "gateway.fetch_repeat",
    "gateway.heartbeat_repeat",
    "telemetry",
    "actors.data_plane",
    "storage.topics",
    "gateway.context",
    "gateway.apis._build",
    "gateway.apis.groups",
    "gateway.apis.offsets",
    "actors.registry",
    "actors.group_actor",
    "actors.coordinator_log",
    "actors.durable_log",
    "group.machine",
    "group.offsets",
    "group.latest",
    "group.effects",
    "storage.coordinator_records",
    "storage.entry_cbor",
    "group.hot_values",
    "storage.coordinator_segments",
)


def compiled_modules() -> list[str]:
    """The HOT_MODULES this process runs compiled (an extension module, not a .py file)."""
    compiled = []
    for name in HOT_MODULES:
        module = importlib.import_module(f"rafka_actors.{name}")
        if not (module.__file__ or "").endswith(".py"):
            compiled.append(name)
    return compiled


def describe() -> str:
    """For the start-up log: how much of the hot path is compiled."""
    compiled = compiled_modules()
    if not compiled:
        return "pure Python (an editable install, or a wheel built without a C compiler)"
    return f"compiled by mypyc: {len(compiled)} of {len(HOT_MODULES)} modules"
