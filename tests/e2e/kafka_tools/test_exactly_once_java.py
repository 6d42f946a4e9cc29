"""Exactly-once consume-transform-produce across SIGKILLs with Kafka's Java client
(java/TxnCopier.java, where Java is present; see peer.py): the same run as
test_exactly_once.py's, once on transactions v2 (the broker's default `transaction.version`)
and once with the broker's `transaction.version=1`, where the Java client stays on v1. Its
debug log shows the version it chose and the EndTxn versions it sent. (A file of its own, so
the suite's workers share the runs out.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ...broker_process import BrokerProcess
from ..test_exactly_once import BROKER_SETTINGS, DEADLINE, PARTITIONS, copy_across_kills
from .java_programs import debug_log4j, java_classes, java_command
from .peer import KafkaPeer

pytestmark = [pytest.mark.e2e]


@pytest.mark.timeout(DEADLINE)  # (its JVMs start slowly on a loaded machine)
@pytest.mark.parametrize("transaction_version", [2, 1])
def test_the_java_client_copies_3000_records_exactly_once_across_sigkills(
    kafka_peer: KafkaPeer,
    broker_factory: type[BrokerProcess],
    request: pytest.FixtureRequest,
    tmp_path: Path,
    transaction_version: int,
) -> None:
    classes = java_classes(kafka_peer.home, request.config.cache)  # type: ignore[arg-type]
    log4j = debug_log4j(tmp_path)
    command = [
        *java_command(kafka_peer.home, [classes]),
        f"-Dlog4j2.configurationFile={log4j}",
        "TxnCopier",
    ]
    broker = broker_factory(*BROKER_SETTINGS, f"transaction.version={transaction_version}")
    log = tmp_path / "copier.log"
    tag = f"javav{transaction_version}"
    copy_across_kills(broker, [*command, str(PARTITIONS)], tag, 3000, log)
    text = log.read_text(errors="replace")
    v2 = transaction_version >= 2
    assert f"Updating isTV2 enabled to {'true' if v2 else 'false'}" in text
    assert ("apiKey=END_TXN, apiVersion=5" in text) == v2
