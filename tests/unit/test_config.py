from __future__ import annotations

from pathlib import Path

import pytest

from rafka_actors.broker import group_config
from rafka_actors.config import BrokerConfig, ConfigError, load_config, parse_properties
from rafka_actors.data_dir import open_coordinator_log
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey


def test_defaults_are_kafkas() -> None:
    config = load_config(environ={})
    assert config.listen == "127.0.0.1:9092"
    assert config.data_dir == Path("rafka-data")
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.socket_request_max_bytes == 104857600
    assert config.group_initial_rebalance_delay_ms == 3000
    assert config.offsets_commit_timeout_ms == 5000
    assert config.group_share_record_lock_duration_ms == 30000
    assert config.group_share_delivery_count_limit == 5
    assert config.share_auto_offset_reset == "latest"


def test_file_then_env_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text(
        "# comment\nnum.partitions=3\nauto.create.topics.enable = false\n"
        "group.initial.rebalance.delay.ms: 100\n"
    )
    environ = {"RAFKA_NUM_PARTITIONS": "4", "RAFKA_KAFKA_CLIENT_HOST": "broker.example"}
    config = load_config(
        config_file=path, environ=environ, overrides={"group.initial.rebalance.delay.ms": "0"}
    )
    assert config.num_partitions == 4  # env beats file
    assert config.auto_create_topics_enable is False  # file beats default
    assert config.group_initial_rebalance_delay_ms == 0  # flag beats file
    assert config.kafka_client_host == "broker.example"


def test_env_name_form() -> None:
    config = load_config(environ={"RAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0"})
    assert config.group_initial_rebalance_delay_ms == 0


@pytest.mark.parametrize(
    "overrides",
    [
        {"num.partitions": "many"},
        {"auto.create.topics.enable": "perhaps"},
        {"listen": "nohost"},
        {"socket.request.max.bytes": "0"},
        {"group.consumer.rebalance.heartbeat.interval.ms": "0"},
        {"offsets.commit.timeout.ms": "0"},
        {"coordinator.log.preallocate.bytes": "-1"},
        # share groups
        {"share.auto.offset.reset": "none"},
        {"group.share.record.lock.duration.ms": "0"},
        {"group.share.heartbeat.interval.ms": "45000"},
    ],
)
def test_bad_values_are_refused(overrides: dict[str, str]) -> None:
    with pytest.raises(ConfigError):
        load_config(environ={}, overrides=overrides)


def test_unknown_keys_are_refused_with_a_hint() -> None:
    """Issue 46: a mistyped key must not pass for its default silently (it was a warning)."""
    with pytest.raises(ConfigError, match=r"unknown setting 'no\.such\.key' from command line"):
        load_config(environ={}, overrides={"no.such.key": "1"})
    with pytest.raises(ConfigError, match=r"did you mean group\.min\.session\.timeout\.ms\?"):
        load_config(environ={}, overrides={"group.min.sesion.timeout.ms": "1"})


def test_a_misspelled_environment_variable_is_refused_with_a_hint() -> None:
    """Issue 51: RAFKA_NUM_PARTITONS=3 was silently ignored, where a misspelled flag or key
    gets a "did you mean"; RAFKA_ variables close to no setting (a test's, a tool's) are not
    the broker's and stay ignored."""
    hint = r"'RAFKA_NUM_PARTITONS' from environment \(did you mean RAFKA_NUM_PARTITIONS"
    with pytest.raises(ConfigError, match=hint):
        load_config(environ={"RAFKA_NUM_PARTITONS": "3"})
    config = load_config(environ={"RAFKA_FUZZ_EXAMPLES": "10", "RAFKA_NUM_PARTITIONS": "3"})
    assert config.num_partitions == 3


def test_properties_parser_rejects_junk() -> None:
    with pytest.raises(ConfigError):
        parse_properties("just words\n")


def test_listen_address_parts() -> None:
    config = BrokerConfig(listen="[::1]:19092")
    assert (config.listen_host, config.listen_port) == ("::1", 19092)


def test_consumer_heartbeat_cadences_reach_the_group_machine() -> None:
    overrides = {
        "group.consumer.heartbeat.interval.ms": "3000",
        "group.consumer.rebalance.heartbeat.interval.ms": "100",
    }
    config = group_config(load_config(environ={}, overrides=overrides))
    assert config.consumer_heartbeat_interval_ms == 3000
    assert config.consumer_rebalance_heartbeat_interval_ms == 100
    # the pure machine's defaults are the broker's
    defaults = group_config(BrokerConfig())
    assert defaults.consumer_rebalance_heartbeat_interval_ms == 250
    assert GroupConfig().consumer_rebalance_heartbeat_interval_ms == 250


@pytest.mark.parametrize("preallocate", [0, 8192])
async def test_the_coordinator_log_preallocates_what_the_setting_says(
    tmp_path: Path, preallocate: int
) -> None:
    overrides = {
        "data.dir": str(tmp_path),
        "coordinator.log.preallocate.bytes": str(preallocate),
        "coordinator.log.fsync": "never",
    }
    log = open_coordinator_log(load_config(environ={}, overrides=overrides))
    try:
        await log.append(GroupKey(1, "g"), [OffsetCommitRecord("g", "t", 0, 1, -1, None, 0)])
        [segment] = (tmp_path / "coordinator").glob("*.log")
        written = log.segments.size_bytes
        assert 0 < written < 8192
        assert segment.stat().st_size == (written + preallocate if preallocate else written)
    finally:
        log.close()
