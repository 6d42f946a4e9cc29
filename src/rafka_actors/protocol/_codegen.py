"""Source-emission machinery for generated code (:mod:`.fast_encoder`, :mod:`.frame_guard`).

:class:`Module` holds the globals and sources of one generated unit and
compiles them (registered with :mod:`linecache`, so tracebacks show the code).

A generated encoder appends ``bytes`` parts to a list through a local alias
``_a`` (and ``_ext`` for ``list.extend``); the caller joins the list once, so
large blobs (record batches) are copied exactly once into the final frame.

:class:`FunctionBuilder` keeps a *pending* run of fixed-width values (a
struct format plus argument expressions). Consecutive fixed-width writes are
merged and emitted as one precompiled ``struct.Struct.pack`` call when the run
ends: before any variable-length append and at every block boundary (``if``,
``for``), so argument expressions are always evaluated inside the block whose
variables they reference. Temporaries get unique names, so a pending
expression can never observe a later reassignment.
"""

from __future__ import annotations

import contextlib
import linecache
import re
import struct
from collections.abc import Callable, Iterator
from typing import Any

_INT_LITERAL = re.compile(r"-?[0-9]+")
_UV_SMALL = tuple(bytes((i,)) for i in range(128))


def uvarint(n: int) -> bytes:
    """Kafka unsigned varint (7 bits per byte, little-endian groups)."""
    if n < 128:
        return _UV_SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class Module:
    """Namespace and sources shared by the functions generated for one class."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"_uv": uvarint, "_pack": struct.pack}
        self.sources: list[str] = []
        self._counter = 0
        self._structs: dict[str, str] = {}

    def fresh(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}{self._counter}"

    def const(self, value: object, prefix: str = "_k") -> str:
        """Bind ``value`` to a new global name of the generated module."""
        name = self.fresh(prefix)
        self.namespace[name] = value
        return name

    def packer(self, fmt: str) -> str:
        """Global name of a precompiled ``Struct(">" + fmt).pack`` (deduplicated)."""
        name = self._structs.get(fmt)
        if name is None:
            name = self._structs[fmt] = self.const(struct.Struct(">" + fmt).pack, "_s")
        return name

    def compile(self, label: str) -> dict[str, Any]:
        """Exec all sources; registers them with linecache for readable tracebacks."""
        source = "\n\n".join(self.sources) + "\n"
        filename = f"<generated {label}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        exec(compile(source, filename, "exec"), self.namespace)
        return self.namespace


class FunctionBuilder:
    """Accumulates the body of one generated function."""

    def __init__(self, module: Module, signature: str, prologue: list[str]) -> None:
        self.module = module
        self._signature = signature
        self._lines = ["    " + line for line in prologue]
        self._indent = 1
        self._fmt: list[str] = []
        self._args: list[str] = []

    def temp(self, prefix: str = "_t") -> str:
        return self.module.fresh(prefix)

    def assign(self, code: str) -> None:
        """A statement that writes nothing (pending fixed values stay queued)."""
        self._lines.append("    " * self._indent + code)

    def fixed(self, fmt: str, arg: str) -> None:
        """Queue a fixed-width value: struct format code(s) and an argument expression."""
        self._fmt.append(fmt)
        self._args.append(arg)

    def append(self, expr: str) -> None:
        """Append a bytes-like expression as its own part."""
        self.statement(f"_a({expr})")

    def statement(self, code: str) -> None:
        """A statement that writes: everything queued before it is emitted first."""
        self.flush()
        self.assign(code)

    def flush(self) -> None:
        if self._fmt:
            fmt = "".join(self._fmt)
            if all(_INT_LITERAL.fullmatch(arg) for arg in self._args):
                # e.g. empty tagged-field sections: pack once, at generation time
                value = struct.pack(">" + fmt, *map(int, self._args))
                self.assign(f"_a({self.module.const(value, '_c')})")
            else:
                self.assign(f"_a({self.module.packer(fmt)}({', '.join(self._args)}))")
            self._fmt.clear()
            self._args.clear()

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.statement(header)
        self._indent += 1
        mark = len(self._lines)
        yield
        self.flush()
        if len(self._lines) == mark:
            self.assign("pass")
        self._indent -= 1

    def finish(self, epilogue: list[str] | None = None) -> str:
        """Close the function and add its source to the module."""
        self.flush()
        self._lines.extend("    " + line for line in epilogue or [])
        source = "\n".join([f"def {self._signature}:", *self._lines])
        self.module.sources.append(source)
        return source


PartsEncoder = Callable[[Any, list[bytes]], None]
