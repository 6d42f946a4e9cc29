"""What one of Kafka's tools printed, as plain JSON to compare: tables as rows of their
columns, `Key: value` lines (kafka-topics --describe) as dicts, other lines as text; broker
chosen values (member and producer ids, topic ids, hosts and ports, times) as the scenario's
placeholders, through the same Normaliser as the wire answers.

A table is a line of column names followed by lines with as many whitespace-separated cells
(Kafka's tools print `%-Ns` columns; no cell holds a space, except COORDINATOR (ID), whose
name has one too). Rows and lines are sorted where the tools' order is the broker's
(listings): `sort=True`.
"""

from __future__ import annotations

import base64
import re
import uuid
from typing import Any

from .normalise import Normaliser

# column name -> placeholder kind
_COLUMNS = {
    "CONSUMER-ID": "member",
    "MEMBER-ID": "member",
    "HOST": "host",
    "ProducerId": "producer",
    "TopicId": "uuid",
}
_TIME_COLUMNS = re.compile(r"StartTime|Timestamp|Duration")
_EPOCH_COLUMNS = re.compile(r"^(CURRENT|TARGET|MEMBER|GROUP)-EPOCH$|AssignmentEpoch")
_HEADER = re.compile(r"[A-Z#(][A-Za-z#()-]*")
_ADDRESS = re.compile(r"/?(\d+\.\d+\.\d+\.\d+)(?::(\d+))?")


_LOG_TIME = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] ")
_STACK_FRAME = re.compile(r"\(stderr\)\s+at ")


def parse(output: str, normaliser: Normaliser, sort: bool = False) -> list[Any]:
    """The output's tables and lines (a Java stack trace's frames left out, and the time of a
    log line)."""
    lines = [
        _LOG_TIME.sub("", line.rstrip())
        for line in output.splitlines()
        if line.strip() and not _STACK_FRAME.match(line)
    ]
    out: list[Any] = []
    i = 0
    while i < len(lines):
        header = lines[i].split()
        rows = _rows(header, lines[i + 1 :])
        if rows:
            table = [_row(header, row.split(), normaliser) for row in rows]
            out.append(sorted(table, key=repr) if sort else table)
            i += 1 + len(rows)
            continue
        out.append(_line(lines[i], normaliser))
        i += 1
    return sorted(out, key=repr) if sort else out


def _rows(header: list[str], following: list[str]) -> list[str]:
    """The rows of a table headed by `header` (none if it is not a header)."""
    if len(header) < 2 or not all(_HEADER.fullmatch(name) for name in header):
        return []
    rows = []
    for line in following:
        if len(line.split()) != len(header):
            break
        rows.append(line)
    return rows


def _row(header: list[str], cells: list[str], normaliser: Normaliser) -> dict[str, Any]:
    return {name: _cell(name, cell, normaliser) for name, cell in zip(header, cells, strict=True)}


def _cell(column: str, cell: str, normaliser: Normaliser) -> str:
    kind = _COLUMNS.get(column)
    if kind == "host":
        return _addresses(cell, normaliser)
    if kind is not None and cell not in ("-", ""):
        return normaliser.placeholder(kind, _as_on_the_wire(kind, cell))
    if cell.isdigit() and int(cell) > 0:
        if _TIME_COLUMNS.search(column):
            return "<time>"
        if _EPOCH_COLUMNS.search(column):
            return normaliser.placeholder("epoch", int(cell))
    return _addresses(cell, normaliser)


def _as_on_the_wire(kind: str, cell: str) -> object:
    """The value as the wire answers held it, so that both get one placeholder."""
    if kind == "producer":
        return int(cell)
    if kind == "uuid":  # Kafka's base64 form
        return uuid.UUID(bytes=base64.urlsafe_b64decode(cell + "=="))
    return cell


def _line(line: str, normaliser: Normaliser) -> Any:
    """`Key: value` pairs (tab-separated) as a dict, else the line's text."""
    pairs = [
        part.split(": ", 1) if ": " in part else part.split(":", 1)
        for part in line.split("\t")
        if part.strip()
    ]
    if len(pairs) > 1 and all(len(pair) == 2 for pair in pairs):
        return {key.strip(): _cell(key.strip(), value.strip(), normaliser) for key, value in pairs}
    return _addresses(line.strip(), normaliser)


def _addresses(text: str, normaliser: Normaliser) -> str:
    """An address with a port as `<host n>:<port n>`, Java's `/address` as `/<host n>`."""

    def named(match: re.Match[str]) -> str:
        host = normaliser.placeholder("host", match[1])
        slash = "/" if match[0].startswith("/") else ""
        port = f":{normaliser.placeholder('port', int(match[2]))}" if match[2] else ""
        return f"{slash}{host}{port}"

    return _ADDRESS.sub(named, text)
