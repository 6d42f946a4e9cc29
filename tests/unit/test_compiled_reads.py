"""The compiled request handlers read a request's optional fields by version.

In a mypyc-compiled module `getattr(request, "field", default)` on a version that lacks the
field raises an AttributeError inside (its message formatted, then cleared): five of them
took a fifth of an OffsetFetch's time (docs/performance-history.md, session 32). Kafka's schemas
say from which version a field exists, so the handlers compiled for the hot path
(compiled.HOT_MODULES) read it when the version has it instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

from rafka_actors.compiled import HOT_MODULES

SRC = Path(__file__).resolve().parents[2] / "src" / "rafka_actors"


def test_compiled_request_handlers_use_no_getattr_default() -> None:
    handlers = [name for name in HOT_MODULES if name.startswith("gateway.apis.")]
    assert handlers, "the request handlers are among the compiled modules"
    offenders = []
    for name in handlers:
        path = SRC / (name.replace(".", "/") + ".py")
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "getattr"
                and len(node.args) == 3
            ):
                offenders.append(f"{name}:{node.lineno}")
    assert offenders == []
