"""One topic store per organisation: the on-disk layout, start-up and lazily made stores."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.topics import TopicStore, stored_orgs, topics_dir

from ..batch_builder import build_batch


def test_org_zero_keeps_the_single_tenant_layout(tmp_path: Path) -> None:
    assert topics_dir(tmp_path, 0) == tmp_path / "topics"
    assert topics_dir(tmp_path, 12) == tmp_path / "orgs" / "12" / "topics"


def test_a_store_per_org_under_its_own_directory(tmp_path: Path) -> None:
    zero = TopicStore.open(tmp_path)
    one = TopicStore.open(tmp_path, org_id=1)
    a = zero.create("orders", 1)
    b = one.create("orders", 2)
    assert a.topic_id != b.topic_id
    assert (tmp_path / "topics" / "orders" / "topic.json").is_file()
    assert (tmp_path / "orgs" / "1" / "topics" / "orders" / "1").is_dir()
    zero.close()
    one.close()
    reopened = TopicStore.open(tmp_path, org_id=1)
    found = reopened.by_name("orders")
    assert found is not None and (found.topic_id, len(found.partitions)) == (b.topic_id, 2)
    assert reopened.by_id(a.topic_id) is None  # org 0's id is not org 1's
    reopened.close()


def test_stored_orgs_are_the_canonical_directories_with_topics(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    assert stored_orgs(tmp_path) == []
    for name in ("3", "12", "01", "0", "abc", "-1", "\u00b2"):
        (tmp_path / "orgs" / name / "topics").mkdir(parents=True)
    (tmp_path / "orgs" / "7").mkdir()  # no topics/ inside: nothing to open
    with caplog.at_level(logging.WARNING):
        assert stored_orgs(tmp_path) == [3, 12]
    ignored = sorted(r.getMessage() for r in caplog.records)
    assert ignored == sorted(
        f"ignoring {tmp_path / 'orgs' / name}: not an organisation's directory"
        for name in ("01", "0", "abc", "-1", "\u00b2")  # a superscript two is a digit to str
    )


def test_an_org_without_topics_leaves_nothing_on_disk(tmp_path: Path) -> None:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    store = data.topics_for(5)
    assert len(store) == 0 and store.by_name("x") is None
    assert data.topics_for(5) is store  # one store per org, found by a dict lookup
    assert data.image_of(5).by_name == {}
    assert data.delete_topic("x", org_id=5) is None
    assert not (tmp_path / "orgs").exists()
    data.create_topic("x", 1, org_id=5)
    assert (tmp_path / "orgs" / "5" / "topics" / "x" / "topic.json").is_file()
    assert data.image_of(5).by_name["x"].partitions == 1
    data.close()


def test_start_up_opens_every_orgs_store(tmp_path: Path) -> None:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    ids = {org_id: data.create_topic("t", 1, org_id=org_id).topic_id for org_id in (0, 2, 30)}
    topic = data.topics_for(30).by_name("t")
    assert topic is not None
    data.append(topic, 0, [memoryview(build_batch([(None, b"a"), (None, b"b")]))])
    data.flush()
    data.close()

    reopened = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    assert list(reopened.orgs()) == [0, 2, 30]
    for org_id, topic_id in ids.items():
        found = reopened.topics_for(org_id).by_id(topic_id)
        assert found is not None and found.name == "t"
    again = reopened.topics_for(30).by_name("t")
    assert again is not None and again.partitions[0].log_end_offset == 2
    other = reopened.topics_for(2).by_name("t")
    assert other is not None and other.partitions[0].log_end_offset == 0
    reopened.close()


def test_deleting_a_topic_of_one_org_leaves_the_same_name_elsewhere(tmp_path: Path) -> None:
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    data.create_topic("t", 1, org_id=1)
    data.create_topic("t", 1, org_id=2)
    version = data.image_of(2).version
    assert data.delete_topic("t", org_id=1) is not None
    assert data.topics_for(2).by_name("t") is not None
    assert data.image_of(2).version == version  # org 2's groups see no change
    assert not (tmp_path / "orgs" / "1" / "topics" / "t").exists()
    data.close()
