"""The layering of src/rafka_actors, read from every module's imports.

`layering_violations` reads the AST of every module of a package and reports
- every import cycle between its modules, found with the standard library's
  `graphlib.TopologicalSorter` (enough for a graph this size, and no dependency to keep, as
  grimp or import-linter would be), and
- every import that a rule of `RULES` forbids: (package, modules, why) says that the modules
  of the package import none of those modules (a module forbids its submodules too, so
  ``trio`` forbids ``trio.lowlevel``);
except what `KNOWN_VIOLATIONS_BEING_REMOVED` lists, in one place, for rewrites under way; a
test fails once one of its entries no longer occurs, so that it gets emptied.

Every import counts wherever it is written: at the top of a module, inside a function (a lazy
import still ties the two modules together), and under ``if TYPE_CHECKING:`` (a cycle that
only annotations need is still two modules that each need the other: a design problem).
Relative imports are resolved; ``from package import name`` is an import of the submodule
``package.name`` if there is one, else of the package. An import of ``a.b.c`` counts as an
import of that module only, not of the ``__init__`` modules Python runs on the way.

A second check, `runtime_cycles`, looks for cycles as Python meets them, counting package
``__init__`` modules: there ``from package import name`` also reads the package's namespace,
so it imports the package's ``__init__`` too, even where ``name`` is a submodule (a module of
`gateway/apis/` writing ``from . import transactions`` while that package's ``__init__``
imports it is a cycle, though each module only ever names the other's submodules).
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "rafka_actors"


def ours(*names: str) -> frozenset[str]:
    """Modules of this package, named relative to it."""
    return frozenset(f"{PACKAGE}.{name}" for name in names)


# What a pure package (a state machine, the wire codec) must not import: an event loop, or
# the modules that reach files, sockets, threads and processes. I/O belongs to actors/,
# gateway/ and storage/.
IO = frozenset(
    {"trio", "tricycle", "outcome", "asyncio", "os", "socket", "select", "selectors"}
    | {"threading", "subprocess", "multiprocessing"}
)

# (package, below the checked one; the modules it must not import, as imported; why)
Rule = tuple[str, frozenset[str], str]

# One line a rule. group_common/ is beneath both group types, coordinator/ above both, and
# classic_group/ and consumer_group/ (KIP-848) never import each other.
RULES: tuple[Rule, ...] = (
    ("protocol", IO, "the wire codec is pure"),
    ("group_common", IO, "what every group type shares is pure"),
    ("classic_group", IO, "the classic group state machine is pure"),
    ("consumer_group", IO, "the KIP-848 group state machine is pure"),
    ("coordinator", IO, "the dispatch over both group types is pure"),
    ("transaction", IO, "the transaction coordinator's state machine is pure"),
    (
        "transaction",
        ours("classic_group", "consumer_group", "coordinator"),
        "transactions: beside the group types, not above them",
    ),
    ("share_group", IO, "the KIP-932 share group state machine is pure"),
    ("share_group", ours("classic_group", "consumer_group", "coordinator"), "share: no other type"),
    ("group_common", ours("share_group"), "beneath all group types, share groups too"),
    ("classic_group", ours("share_group"), "classic: no share groups"),
    ("consumer_group", ours("share_group"), "KIP-848: no share groups"),
    ("classic_group", ours("consumer_group", "coordinator"), "classic: no KIP-848, nothing above"),
    ("consumer_group", ours("classic_group", "coordinator"), "KIP-848: no classic, nothing above"),
    (
        "group_common",
        ours("classic_group", "consumer_group", "coordinator"),
        "beneath all group types",
    ),
    ("gateway.apis", ours("actors"), "API handlers use no actor internals"),
    ("storage", ours("actors", "gateway"), "storage sits beneath the actors and the gateway"),
    ("actors", ours("gateway", "cli", "admin"), "actors sit beneath the gateway"),
    ("metrics", ours("gateway", "cli", "admin"), "metrics read beneath the gateway"),
    ("actors", ours("metrics"), "actors report through callbacks, not to the metrics"),
    ("lag", IO, "the lag arithmetic the metrics, the pipeline and the tools share is pure"),
    ("pipeline", ours("metrics"), "the pipeline shares lag.py with the metrics, not their code"),
    (
        "config",
        ours("classic_group", "consumer_group", "share_group", "coordinator", "transaction"),
        "the settings reach no machine: names are checked against group_common's tables",
    ),
)


@dataclass(frozen=True)
class Known:
    """Violations tolerated for now."""

    # Sets of modules among which imports may form cycles.
    cycles: tuple[frozenset[str], ...] = ()
    # (importer, imported) pairs that RULES would refuse.
    imports: frozenset[tuple[str, str]] = field(default_factory=frozenset)


# Known violations that rewrites under way remove; empty (`Known()`) when none is under way.
KNOWN_VIOLATIONS_BEING_REMOVED = Known()


# -- the checker ------------------------------------------------------------------------------


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of `package` (a directory under `root`) by its dotted name."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        files[".".join(parts)] = path
    return files


def imports_of(
    name: str, path: Path, modules: Iterable[str], *, packages_read: bool = False
) -> set[str]:
    """What module `name` (at `path`) imports: modules of the package as the modules they
    resolve to, anything else as written. With `packages_read`, ``from package import ...``
    imports the package (its ``__init__``) as well."""
    known = set(modules)
    roots = {module.split(".")[0] for module in known}
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def ours_or_written(target: str) -> str:
        """Ours: the longest prefix that is a module (``a.b.NAME`` is ``a.b``)."""
        while target not in known and "." in target and target.split(".")[0] in roots:
            target = target.rsplit(".", 1)[0]
        return target

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(ours_or_written(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name if is_package else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    base = base.rsplit(".", 1)[0]
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                found.add(submodule if submodule in known else ours_or_written(source))
            if packages_read and source in known:
                found.add(source)
    found.discard(name)
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def layering_violations(
    root: Path, package: str, rules: Iterable[Rule] = RULES, known: Known = Known()
) -> list[str]:
    """Every import cycle between modules of `package` (a directory under `root`) and every
    import a rule forbids, except what `known` tolerates."""
    files = module_files(root, package)
    graph = {name: imports_of(name, path, files) for name, path in files.items()}
    problems = []
    for where, forbidden, why in rules:
        for module, imported in sorted(graph.items()):
            if not _within(module, f"{package}.{where}"):
                continue
            for target in sorted(imported):
                if (module, target) in known.imports:
                    continue
                if any(_within(target, banned) for banned in forbidden):
                    problems.append(f"{module} imports {target}: {why}")
    return problems + _cycles(graph, files, known)


def runtime_cycles(root: Path, package: str) -> list[str]:
    """Every import cycle between modules of `package`, package ``__init__`` modules counted
    as Python runs them (`imports_of`'s `packages_read`)."""
    files = module_files(root, package)
    graph = {
        name: imports_of(name, path, files, packages_read=True) for name, path in files.items()
    }
    return _cycles(graph, files, Known())


def _cycles(graph: dict[str, set[str]], files: dict[str, Path], known: Known) -> list[str]:
    """One line per cycle found: each one is broken at an edge and the search goes on."""
    edges = {
        module: {
            target
            for target in imported
            if target in files and not any({module, target} <= group for group in known.cycles)
        }
        for module, imported in graph.items()
    }
    found = []
    while True:
        try:
            graphlib.TopologicalSorter(edges).prepare()
        except graphlib.CycleError as error:
            # error.args[1] is [a, b, ..., a], each a predecessor (an import) of the next
            cycle = list(reversed(error.args[1]))  # each imports the next
            found.append("import cycle: " + " -> ".join(cycle))
            edges[cycle[0]].discard(cycle[1])
        else:
            return found


def stale_known_violations(
    root: Path, package: str, rules: Iterable[Rule], known: Known
) -> list[str]:
    """The entries of `known` that no longer occur."""
    files = module_files(root, package)
    graph = {name: imports_of(name, path, files) for name, path in files.items()}
    stale = []
    for importer, imported in sorted(known.imports):
        refused = any(
            _within(importer, f"{package}.{where}")
            and any(_within(imported, banned) for banned in forbidden)
            for where, forbidden, _ in rules
        )
        if not refused or imported not in graph.get(importer, set()):
            stale.append(f"{importer} -> {imported} no longer needs an exception")
    for group in known.cycles:
        inside = {module: graph.get(module, set()) & group for module in group}
        try:
            graphlib.TopologicalSorter(inside).prepare()
        except graphlib.CycleError:
            continue
        stale.append(f"no import cycle among {sorted(group)} any more")
    return stale


# -- the rules, on this repository -------------------------------------------------------------


def test_src_has_no_cycles_and_keeps_its_layers() -> None:
    assert layering_violations(SRC, PACKAGE, RULES, KNOWN_VIOLATIONS_BEING_REMOVED) == []


def test_src_has_no_import_cycle_at_runtime_counting_package_init_modules() -> None:
    assert runtime_cycles(SRC, PACKAGE) == []


def test_every_known_violation_still_occurs() -> None:
    # One that no longer does is removed from KNOWN_VIOLATIONS_BEING_REMOVED.
    assert stale_known_violations(SRC, PACKAGE, RULES, KNOWN_VIOLATIONS_BEING_REMOVED) == []


def test_the_packages_the_rules_name_exist() -> None:
    modules = module_files(SRC, PACKAGE)
    for package, _, _ in RULES:
        assert f"{PACKAGE}.{package}" in modules, f"a rule names {package}, not a package"


# -- the checker, on a planted package ---------------------------------------------------------


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_the_checker_finds_a_planted_cycle_and_a_planted_forbidden_import(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/pure/__init__.py": "",
            "fake/pure/a.py": "from . import b\n",
            "fake/pure/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from fake.pure.a import Thing\n"  # a cycle only annotations need
            ),
            "fake/pure/clock.py": "def now():\n    import trio\n    return trio.current_time()\n",
            "fake/io/__init__.py": "",
            "fake/io/server.py": "import socket\nfrom ..pure import a\n",
        },
    )
    rules = [("pure", frozenset({"trio", "socket", "fake.io"}), "pure")]
    assert layering_violations(tmp_path, "fake", rules) == [
        "fake.pure.clock imports trio: pure",
        "import cycle: fake.pure.a -> fake.pure.b -> fake.pure.a",
    ]
    # the same, tolerated
    known = Known(
        cycles=(frozenset({"fake.pure.a", "fake.pure.b"}),),
        imports=frozenset({("fake.pure.clock", "trio")}),
    )
    assert layering_violations(tmp_path, "fake", rules, known) == []
    assert stale_known_violations(tmp_path, "fake", rules, known) == []
    # and once they are gone, the exceptions are stale
    _write(tmp_path, {"fake/pure/b.py": "", "fake/pure/clock.py": "import time\n"})
    assert stale_known_violations(tmp_path, "fake", rules, known) == [
        "fake.pure.clock -> trio no longer needs an exception",
        "no import cycle among ['fake.pure.a', 'fake.pure.b'] any more",
    ]


def test_imports_resolve_to_the_modules_they_name(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/top.py": "",
            "fake/pkg/__init__.py": "from .mod import VALUE\n",
            "fake/pkg/mod.py": "VALUE = 1\n",
            "fake/pkg/sub/__init__.py": "",
            "fake/pkg/sub/deep.py": (
                "import os.path\n"
                "import fake.pkg.mod\n"
                "from ... import top\n"
                "from .. import mod, VALUE\n"
                "from fake.pkg.mod import VALUE as V\n"
            ),
        },
    )
    files = module_files(tmp_path, "fake")
    deep = imports_of("fake.pkg.sub.deep", files["fake.pkg.sub.deep"], files)
    assert deep == {"os.path", "fake.pkg.mod", "fake.top", "fake.pkg"}
    init = imports_of("fake.pkg", files["fake.pkg"], files)
    assert init == {"fake.pkg.mod"}
    read = imports_of("fake.pkg.sub.deep", files["fake.pkg.sub.deep"], files, packages_read=True)
    assert read == deep | {"fake", "fake.pkg"}  # `from ... import top`, `from .. import mod`


def test_the_runtime_check_finds_a_package_that_its_own_module_reads(tmp_path: Path) -> None:
    """The shape `gateway/apis/init_producer_id.py` had: a package's ``__init__`` imports its
    modules, one of which reads the package for a sibling. The first check sees no cycle."""
    _write(
        tmp_path,
        {
            "fake/__init__.py": "",
            "fake/apis/__init__.py": "from . import a, b\n",
            "fake/apis/a.py": "from . import b\n",
            "fake/apis/b.py": "",
        },
    )
    assert layering_violations(tmp_path, "fake", []) == []
    assert runtime_cycles(tmp_path, "fake") == [
        "import cycle: fake.apis -> fake.apis.a -> fake.apis"
    ]
    _write(tmp_path, {"fake/apis/a.py": "from .b import THING\n"})  # the module, not the package
    assert runtime_cycles(tmp_path, "fake") == []
