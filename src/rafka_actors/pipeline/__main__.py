"""``python -m rafka_actors.pipeline JOB ...``: the same jobs as ``rafka-actors pipeline JOB``.

This file is also what to hand to ``spark-submit``, which runs a script, not a console
command (see docs/pipeline.md)::

    APP=$(python -c 'import rafka_actors.pipeline.__main__ as m; print(m.__file__)')
    spark-submit --master spark://HOST:7077 "$APP" lag --data-dir /shared/data --out /shared/lag
"""

from __future__ import annotations

import argparse
import sys

from rafka_actors.pipeline.cli import register


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rafka-actors")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["pipeline", *(sys.argv[1:] if argv is None else argv)])
    return int(args.run(args))


if __name__ == "__main__":
    sys.exit(main())
