"""Rebalance time and commit latency against group size: the chart of docs/performance.md.

    .venv/bin/python bench/group_size.py [--bootstrap HOST:PORT] [--sizes 1,10,50,100,300,1000]
        [--runs 3] [--quick] [--png FILE] [--csv FILE] [-o KEY=VALUE ...]

bench/harness/sweep.py says what a run does.
"""

import sys

from harness.sweep import main

if __name__ == "__main__":
    sys.exit(main())
