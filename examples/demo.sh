#!/usr/bin/env bash
# Start the broker, produce 1000 records, consume them in a group of two, stop everything.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
DATA=$(mktemp -d)
.venv/bin/rafka-actors serve --listen 127.0.0.1:19092 --data-dir "$DATA" \
    -o group.initial.rebalance.delay.ms=500 &
BROKER=$!
trap 'kill $BROKER 2>/dev/null; rm -rf "$DATA"' EXIT
sleep 2
$PY examples/produce.py --bootstrap 127.0.0.1:19092 -n 1000
timeout 8 $PY examples/consume_group.py --bootstrap 127.0.0.1:19092 > /tmp/member-a.txt || true &
timeout 8 $PY examples/consume_group.py --bootstrap 127.0.0.1:19092 > /tmp/member-b.txt || true &
wait %2 %3 2>/dev/null || true
echo "member a: $(grep -c '^p' /tmp/member-a.txt) records, $(grep assigned /tmp/member-a.txt | tail -1)"
echo "member b: $(grep -c '^p' /tmp/member-b.txt) records, $(grep assigned /tmp/member-b.txt | tail -1)"
