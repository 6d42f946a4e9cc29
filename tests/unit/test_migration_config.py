"""`group.consumer.migration.policy`: Kafka's values and default, and one line for a bad one."""

from __future__ import annotations

import pytest

from rafka_actors.broker import group_config
from rafka_actors.config import ConfigError, load_config


def test_default_is_kafkas_and_every_value_reaches_the_groups() -> None:
    assert group_config(load_config(environ={})).consumer_migration_policy == "bidirectional"
    for policy, up, down in (
        ("disabled", False, False),
        ("upgrade", True, False),
        ("downgrade", False, True),
        ("bidirectional", True, True),
    ):
        config = group_config(
            load_config(environ={}, overrides={"group.consumer.migration.policy": policy})
        )
        assert (config.upgrade_enabled(), config.downgrade_enabled()) == (up, down)


def test_an_unknown_policy_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"group\.consumer\.migration\.policy: 'sideways'"):
        load_config(environ={}, overrides={"group.consumer.migration.policy": "sideways"})
