"""Topic configs checked as Kafka 4.3.1 checks them: every case below was sent to Kafka 4.3.1
(CreateTopics, validate only) and its answer is the expectation, message for message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rafka_actors.storage.topic_configs import (
    KAFKA_DEFAULTS,
    TOPIC_CONFIGS,
    InvalidConfig,
    topic_defaults,
    validate_topic_configs,
)

# [configs, Kafka's message, or null where Kafka accepted them]
HERE = Path(__file__).parent
KAFKA_ANSWERS = json.loads((HERE / "kafka_4_3_topic_config_answers.json").read_text())


@pytest.mark.parametrize(("configs", "message"), [tuple(answer) for answer in KAFKA_ANSWERS])
def test_topic_configs_are_refused_as_kafka_refuses_them(
    configs: dict[str, str], message: str | None
) -> None:
    if message is None:
        validate_topic_configs(configs, KAFKA_DEFAULTS)
    else:
        with pytest.raises(InvalidConfig) as refused:
            validate_topic_configs(configs, KAFKA_DEFAULTS)
        assert str(refused.value) == message


def test_values_are_stored_as_kafka_shows_them() -> None:
    stored = validate_topic_configs(
        {"flush.ms": " 100 ", "preallocate": "TRUE", "cleanup.policy": " delete "},
        KAFKA_DEFAULTS,
    )
    assert stored == {"flush.ms": "100", "preallocate": "true", "cleanup.policy": "delete"}


def test_every_topic_config_of_kafka_4_3_is_known_with_its_type_and_default() -> None:
    # DescribeConfigs of a new topic on Kafka 4.3.1: (name, default, config type)
    kafka = json.loads((HERE / "kafka_4_3_topic_configs.json").read_text())
    ours = {n: (d.default, d.kind) for n, d in TOPIC_CONFIGS.items() if not d.internal}
    assert ours == {name: (default, kind) for name, default, kind in kafka}


def test_the_brokers_settings_are_the_defaults() -> None:
    settings = {"log.message.timestamp.type": "LogAppendTime", "log.retention.ms": "5"}
    defaults = topic_defaults(settings.get)
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["retention.ms"] == "5"
    assert defaults["segment.ms"] == "604800000"  # no broker synonym here: Kafka's default
    assert "internal.segment.bytes" not in defaults
