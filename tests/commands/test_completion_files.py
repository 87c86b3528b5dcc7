"""Shell completion over a file store: topic directories, config/topics.json, queue-id directories."""

from __future__ import annotations

from rmqstore_cli.commands.common import complete_queue_id, complete_topic


class Ctx:
    def __init__(self, **params):
        self.params = params


def test_topics_and_queue_ids_of_a_file_store(tmp_path):
    for d in ("OrderTopic/0", "OrderTopic/10", "OrderTopic/2", "OrderTopic/notes", "PayTopic/1"):
        (tmp_path / "consumequeue" / d).mkdir(parents=True)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text('{"topicConfigTable": {"ShipTopic": {}, "bad name": {}}}')
    assert complete_topic(Ctx(store=str(tmp_path)), "") == ["OrderTopic", "PayTopic", "ShipTopic"]
    assert complete_topic(Ctx(store=str(tmp_path)), "O") == ["OrderTopic"]
    assert complete_queue_id(Ctx(store=str(tmp_path), topic="OrderTopic"), "") == ["0", "2", "10"]
    assert complete_queue_id(Ctx(store=str(tmp_path), topic=["OrderTopic"]), "1") == ["10"]
    assert complete_queue_id(Ctx(store=str(tmp_path), topic="bad name"), "") == []
    assert complete_queue_id(Ctx(store=str(tmp_path), topic="NoTopic"), "") == []
    assert complete_queue_id(Ctx(store=str(tmp_path)), "") == []


def test_unreadable_topics_json_keeps_the_directories(tmp_path):
    (tmp_path / "consumequeue" / "OrderTopic").mkdir(parents=True)
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "topics.json").write_text("[1, 2]")
    assert complete_topic(Ctx(store=str(tmp_path)), "") == ["OrderTopic"]
