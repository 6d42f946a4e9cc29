"""The compiled build of the request hot path (docs/performance-history.md, session 13).

A wheel (`pip install .`) compiles the modules every request passes through with mypyc, which
turns their type-annotated Python into a C extension. Nothing is written twice: the modules
stay plain Python, an editable install (`pip install -e .`, what the tests run) uses them as
they are, and a wheel built where mypyc or a C compiler cannot run falls back to them with a
warning. `RAFKA_COMPILE=0` skips the compilation.
"""

from __future__ import annotations

import os
import runpy
import sys
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The modules to compile (the request hot path), as src/rafka_actors/compiled.py lists them.
HOT_MODULES = [
    "src/rafka_actors/" + name.replace(".", "/") + ".py"
    for name in runpy.run_path("src/rafka_actors/compiled.py")["HOT_MODULES"]
]


class OptionalMypycBuild(build_ext):
    """Compile HOT_MODULES for a wheel; leave them pure Python when that cannot be done."""

    def finalize_options(self) -> None:
        extensions: list[Any] = []
        if not self.editable_mode and os.environ.get("RAFKA_COMPILE", "1") != "0":
            try:
                from mypyc.build import mypycify

                # mypyc sees only these modules: what comes from any other (trio, kio, and
                # our own) is a plain Python object to it, whether or not that module is
                # installed where the wheel is built, so every build compiles the same code.
                options = [
                    *("--follow-imports=skip", "--ignore-missing-imports"),
                    *("--no-warn-unused-ignores", "--no-warn-redundant-casts"),  # for mypy
                ]
                extensions = mypycify([*options, *HOT_MODULES], opt_level="3")
            except (Exception, SystemExit) as exc:  # mypyc missing, or it refused the code
                _pure_python(exc)
        self.distribution.ext_modules = extensions
        super().finalize_options()

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # no compiler or no Python headers
            for output in self.get_outputs():  # half a compiled group would not import
                if os.path.exists(output):
                    os.remove(output)
            _pure_python(exc)


def _pure_python(reason: BaseException) -> None:
    print(f"rafka-actors: hot path not compiled ({reason!r}); pure Python", file=sys.stderr)


# build_ext runs only for a distribution with extensions: a placeholder, which
# OptionalMypycBuild replaces with the compiled modules (or none).
setup(
    ext_modules=[Extension("rafka_actors._compiled", sources=[])],
    cmdclass={"build_ext": OptionalMypycBuild},
)
