"""Tables (versioned and key-value), KTable.to_stream, and the Task contract."""

from __future__ import annotations

from streamproc import serde
from streamproc.dsl import StreamsBuilder
from streamproc.engine.task import Task, TaskId
from streamproc.records import Record
from streamproc.testing import TopologyTestDriver


def test_versioned_table_to_stream_forwards_only_new_latest_versions() -> None:
    b = StreamsBuilder()
    b.table("t", name="tbl", versioned=100).to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        t = d.input_topic("t")
        t.pipe("k", "a", 10)
        t.pipe("k", "c", 30)
        t.pipe("k", "b", 20)      # out of order: history only
        t.pipe("k", None, 40)     # tombstone: newest
        t.pipe("j", "x", -100)    # beyond history retention: not stored
        assert d.output_topic("out").read_key_values() == [("k", "a"), ("k", "c"), ("k", None)]
        assert d.versioned_store("tbl").get("k", 25) == ("b", 20, 30)
        assert d.versioned_store("tbl").get("j") is None
        assert d.metrics["dropped_records_store"] == 1


def test_key_value_table_join_uses_the_latest_value() -> None:
    b = StreamsBuilder()
    table = b.table("t", name="tbl")
    b.stream("s").join(table, lambda v, t: (v, t)).to("out")
    b.stream("s2").left_join(table, lambda v, t: (v, t)).to("out2")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("t").pipe("k", "new", 50)
        d.input_topic("s").pipe("k", "s", 10)          # not as-of: sees the latest value
        d.input_topic("s").pipe("x", "s", 10)
        d.input_topic("s2").pipe("x", "s", 10)
        d.input_topic("t").pipe("k", None, 60)          # delete
        d.input_topic("s").pipe("k", "s", 70)
        assert d.output_topic("out").read_key_values() == [("k", ("s", "new"))]
        assert d.output_topic("out2").read_key_values() == [("x", ("s", None))]
        assert d.key_value_store("tbl").get("k") is None


def test_task_contract() -> None:
    b = StreamsBuilder()
    table = b.table("rates", name="rates", versioned=1000, key_serde=serde.STRING, value_serde=serde.JSON)
    (b.stream("pay", key_serde=serde.STRING, value_serde=serde.JSON)
      .join(table, lambda p, r: p * r, grace=10, name="conv")
      .to("out", key_serde=serde.STRING, value_serde=serde.JSON))
    topology = b.build()
    task = Task(topology, 0, 3, "app")
    assert task.id == TaskId(0, 3) and str(task.id) == "0_3"
    assert set(task.stores) == {"rates", "conv-buffer", "conv-progress"}
    assert {s.changelog_topic for s in task.stores.values()} == {
        "app-rates-changelog", "app-conv-buffer-changelog", "app-conv-progress-changelog"}
    assert topology.source_serdes("pay") == (serde.STRING, serde.JSON)
    task.process("rates", 3, [Record(b"EUR", b"2", 0, offset=0)])
    task.process("pay", 3, [Record(b"EUR", b"5", 5, offset=0), Record(b"EUR", b"7", 20, offset=1),
                            Record(None, b"1", 20, offset=2)])
    outputs = task.drain_outputs()
    assert [(o.topic, o.key, o.value, o.timestamp) for o in outputs] == [("out", b"EUR", b"10", 5)]
    m = task.metrics
    assert m["records_in"] == 4 and m["records_out"] == 1 and m["dropped_records_null_key"] == 1
    logs = task.drain_changelogs()
    assert [r.value for r in logs["app-conv-progress-changelog"]] == [(20).to_bytes(8, "big")]
    # the 5 ms record: put then delete, de-duplicated to one tombstone; the 20 ms record: a put
    assert len(logs["app-conv-buffer-changelog"]) == 2
    assert task.drain_changelogs() == {}
    task.close()


def test_driver_keeps_changelog_records_in_order() -> None:
    b = StreamsBuilder()
    b.table("t", name="tbl")
    with TopologyTestDriver(b.build(), application_id="a") as d:
        d.input_topic("t").pipe("k", 1, 5)
        d.input_topic("t").pipe("k", 2, 6)
        records = d.changelog("tbl")
        assert records == d.changelog("a-tbl-changelog")
        assert [(r.key, r.value, r.timestamp) for r in records] == [(b'"k"', b"1", 5), (b'"k"', b"2", 6)]
