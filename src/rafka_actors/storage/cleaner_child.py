"""A log cleaning round (log_cleaner.py) in a child process of the broker.

A round decodes every record of the segments it reads: in a worker thread it would hold the
GIL against the event loop for that long (the coordinator log's compaction measured the same,
compaction_child.py). Here it runs beside the loop, at a lower priority.

The broker writes the job as JSON on stdin; this process writes the cleaned files and answers
on stdout with the round's result (each cleaned file's batch index in base64). It only ever
creates ``*.log.cleaned`` files: the broker swaps them in, or deletes them. If the broker
dies, this process is killed with it (``PR_SET_PDEATHSIG``); a file left half-written is
deleted at the partition's next open (segment_swap.py).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import os
import sys
from typing import Any

from .compaction_child import NICENESS, die_with
from .log_cleaner import CleanedGroup, CleaningJob, CleaningResult, clean
from .segment_swap import SegmentIndex

_INDEX_FIELDS = ("offsets", "next_offsets", "positions", "max_ts")


def job_to_json(job: CleaningJob, parent: int) -> bytes:
    return json.dumps({"parent": parent, "job": dataclasses.asdict(job)}).encode()


def job_from_json(raw: Any) -> CleaningJob:
    job = dict(raw)
    job["segments"] = [tuple(s) for s in job["segments"]]
    job["aborted"] = [tuple(a) for a in job["aborted"]]
    job["last_batches"] = {int(pid): tuple(last) for pid, last in job["last_batches"].items()}
    return CleaningJob(**job)


def result_to_json(result: CleaningResult) -> bytes:
    answer = dataclasses.asdict(result)
    answer["groups"] = [_group_row(group) for group in result.groups]
    return json.dumps(answer).encode()


def result_from_json(raw: bytes) -> CleaningResult:
    """The child's answer (ValueError, KeyError or TypeError if it is not one)."""
    answer = json.loads(raw)
    groups = [
        CleanedGroup(row["first"], row["last"], SegmentIndex(**_index_fields(row)))
        for row in answer.pop("groups")
    ]
    return CleaningResult(groups=groups, **answer)


def _index_fields(row: dict[str, Any]) -> dict[str, Any]:
    fields: dict[str, Any] = {name: base64.b64decode(row[name]) for name in _INDEX_FIELDS}
    fields["size"] = int(row["size"])
    return fields


def _group_row(group: CleanedGroup) -> dict[str, Any]:
    row: dict[str, Any] = {"first": group.first, "last": group.last, "size": group.index.size}
    for name in _INDEX_FIELDS:
        row[name] = base64.b64encode(getattr(group.index, name)).decode()
    return row


def main() -> int:
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    request = json.load(sys.stdin)
    die_with(request["parent"])
    os.nice(NICENESS)
    result = clean(job_from_json(request["job"]))
    sys.stdout.buffer.write(result_to_json(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
