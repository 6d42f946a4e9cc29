"""One consumer-group member in its own process, for tests that SIGKILL a member.

    python group_member.py CLIENT BOOTSTRAP GROUP TOPIC '{"session_ms": 3000, ...}'

CLIENT is `confluent` or `kafka-python`; the JSON holds keyword options of the member class
in group_clients.py. It polls forever (commits enabled unless told otherwise) and prints one
JSON line `{"assignment": [...], "consumed": n, "assigned": [[...], ...], "revoked": [...]}`
(the rebalance callbacks it saw) whenever its assignment changes and every
second. It never leaves the group on its own: the test kills it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from tests.e2e.group_clients import SYNC_MEMBERS


def main() -> None:
    client, bootstrap, group, topic, opts = sys.argv[1:6]
    member = SYNC_MEMBERS[client](bootstrap, group, topic, **json.loads(opts))
    consumed, last, reported = 0, None, 0.0
    while True:
        consumed += len(member.poll(0.2))
        current = sorted(member.assignment())
        if current != last or time.monotonic() - reported > 1:
            report = {
                "assignment": current,
                "consumed": consumed,
                "assigned": [sorted(a) for a in member.assigned],
                "revoked": [sorted(r) for r in member.revoked],
            }
            print(json.dumps(report), flush=True)
            last, reported = current, time.monotonic()


if __name__ == "__main__":
    main()
