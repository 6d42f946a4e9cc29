"""The benchmark against peer brokers: workloads (a)-(h), one table (docs/performance.md).

    .venv/bin/python bench/run.py [--brokers ...] [--runs 3] [--workloads abcdefgh] [--quick]

`--help` lists the options; bench/harness/command.py says what a run does.
"""

import sys

from harness.command import main

if __name__ == "__main__":
    sys.exit(main())
