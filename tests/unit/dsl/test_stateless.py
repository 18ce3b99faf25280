"""Stateless operators through the driver: filter, map, flat_map, peek, select_key, split, merge, to."""

from __future__ import annotations

import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder
from streamproc.errors import ProcessingError
from streamproc.records import KeyValue, Record
from streamproc.testing import TopologyTestDriver


def _run(build, inputs, outputs=("out",), topic="in"):
    b = StreamsBuilder()
    build(b.stream(topic))
    with TopologyTestDriver(b.build()) as d:
        for key, value, ts in inputs:
            d.input_topic(topic).pipe(key, value, ts)
        return {name: [(r.key, r.value, r.timestamp) for r in d.output_topic(name).read_records()]
                for name in outputs}


INPUT = [("a", 1, 10), ("b", 2, 20), ("c", 3, 30)]


def test_filter_and_filter_not() -> None:
    out = _run(lambda s: (s.filter(lambda k, v: v % 2 == 1).to("out"), s.filter_not(lambda k, v: v % 2 == 1).to("o2")),
               INPUT, ("out", "o2"))
    assert out == {"out": [("a", 1, 10), ("c", 3, 30)], "o2": [("b", 2, 20)]}


def test_map_map_values_select_key() -> None:
    out = _run(lambda s: (s.map(lambda k, v: (k.upper(), v * 10)).to("out"),
                          s.map_values(lambda v: -v).to("o2"),
                          s.map_values(lambda k, v: f"{k}{v}", with_key=True).to("o3"),
                          s.select_key(lambda k, v: v).to("o4")),
               INPUT, ("out", "o2", "o3", "o4"))
    assert out["out"] == [("A", 10, 10), ("B", 20, 20), ("C", 30, 30)]
    assert out["o2"] == [("a", -1, 10), ("b", -2, 20), ("c", -3, 30)]
    assert out["o3"] == [("a", "a1", 10), ("b", "b2", 20), ("c", "c3", 30)]
    assert out["o4"] == [(1, 1, 10), (2, 2, 20), (3, 3, 30)]


def test_map_accepts_key_value_pairs() -> None:
    out = _run(lambda s: s.map(lambda k, v: KeyValue(v, k)).to("out"), INPUT[:1])
    assert out["out"] == [(1, "a", 10)]


def test_flat_map_and_flat_map_values_forward_in_order() -> None:
    out = _run(lambda s: (s.flat_map(lambda k, v: [(k, i) for i in range(v)]).to("out"),
                          s.flat_map_values(lambda v: [v, v]).to("o2")),
               INPUT[:2], ("out", "o2"))
    assert out["out"] == [("a", 0, 10), ("b", 0, 20), ("b", 1, 20)]
    assert out["o2"] == [("a", 1, 10), ("a", 1, 10), ("b", 2, 20), ("b", 2, 20)]


def test_peek_sees_every_record_and_passes_it_on() -> None:
    seen = []
    out = _run(lambda s: s.peek(lambda k, v: seen.append((k, v))).to("out"), INPUT)
    assert seen == [("a", 1), ("b", 2), ("c", 3)]
    assert out["out"] == INPUT


def test_split_routes_to_first_matching_branch_and_default() -> None:
    def build(s):
        branches = s.split(name="s").branch(lambda k, v: v > 2, name="big").branch(lambda k, v: v > 1, name="mid") \
            .default_branch(name="small")
        branches["s-big"].to("big")
        branches["s-mid"].to("mid")
        branches["s-small"].to("small")
    out = _run(build, INPUT + [("d", 5, 40)], ("big", "mid", "small"))
    assert out == {"big": [("c", 3, 30), ("d", 5, 40)], "mid": [("b", 2, 20)], "small": [("a", 1, 10)]}


def test_branch_without_default_drops_unmatched() -> None:
    def build(s):
        evens, = s.branch(lambda k, v: v % 2 == 0)
        evens.to("out")
    assert _run(build, INPUT)["out"] == [("b", 2, 20)]


def test_merge_keeps_processing_order() -> None:
    b = StreamsBuilder()
    b.stream("x").merge(b.stream("y")).to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("x").pipe("k1", 1, 5)
        d.input_topic("y").pipe("k2", 2, 3)
        d.input_topic("x").pipe("k3", 3, 4)
        assert d.output_topic("out").read_key_values() == [("k1", 1), ("k2", 2), ("k3", 3)]


def test_serdes_are_a_bytes_round_trip() -> None:
    b = StreamsBuilder()
    (b.stream("in", key_serde=serde.STRING, value_serde=serde.JSON)
      .map_values(lambda v: {"n": v["n"] + 1})
      .to("out", key_serde=serde.STRING, value_serde=serde.JSON))
    topology = b.build()
    with TopologyTestDriver(topology) as d:
        d.input_topic("in").pipe("k", {"n": 1}, 7)
        assert d.output_topic("out").read_records() == [Record("k", {"n": 2}, 7)]
    task_outputs = []
    from streamproc.engine.task import Task
    task = Task(topology, 0, 0, "app")
    task.process("in", 0, [Record(b"k", b'{"n":41}', 9, offset=3)])
    task_outputs = task.drain_outputs()
    assert [(o.topic, o.key, o.value, o.timestamp) for o in task_outputs] == [("out", b"k", b'{"n":42}', 9)]


def test_without_serdes_bytes_pass_through_the_task_untouched() -> None:
    b = StreamsBuilder()
    b.stream("in").to("out")
    from streamproc.engine.task import Task
    task = Task(b.build(), 0, 0, "app")
    task.process("in", 0, [Record(b"\x00k", b"\xff", 1, headers=(("h", b"1"),))])
    assert [tuple(o) for o in task.drain_outputs()] == [("out", b"\x00k", b"\xff", 1, (("h", b"1"),))]
    assert task.drain_outputs() == []


def test_output_topic_is_a_queue() -> None:
    b = StreamsBuilder()
    b.stream("in").to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("in").pipe_records([("a", 1, 1), ("b", 2, 2), Record("c", 3, 3)])
        out = d.output_topic("out")
        assert out.queue_size() == 3
        assert out.read_key_value() == ("a", 1)
        assert out.read_value() == 2
        assert out.read_record() == Record("c", 3, 3)
        assert out.is_empty() and out.read_records() == []
        with pytest.raises(IndexError, match="'out' is empty"):
            out.read_record()


def test_user_function_error_is_reported_with_position() -> None:
    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: 1 // v, name="divide").to("out")
    with TopologyTestDriver(b.build()) as d:
        topic = d.input_topic("in")
        topic.pipe("ok", 1, 1)
        with pytest.raises(ProcessingError) as info:
            topic.pipe("bad", 0, 2)
    err = info.value
    assert (err.key, err.topic, err.partition, err.offset, err.operator) == ("bad", "in", 0, 1, "divide")
    assert "ZeroDivisionError" in str(err) and "in[0]@1" in str(err)


def test_map_must_return_a_pair() -> None:
    b = StreamsBuilder()
    b.stream("in").map(lambda k, v: v, name="broken").to("out")
    with TopologyTestDriver(b.build()) as d, pytest.raises(ProcessingError, match="must return a \\(key, value\\) pair"):
        d.input_topic("in").pipe("k", 5, 1)


def test_timestamps_default_to_the_input_topics_clock() -> None:
    b = StreamsBuilder()
    b.stream("in").to("out")
    with TopologyTestDriver(b.build(), initial_wall_clock_ms=1000) as d:
        topic = d.input_topic("in", auto_advance=10)
        topic.pipe("a", 1)
        topic.pipe("b", 2)
        topic.pipe("c", 3, timestamp=5)
        assert [r.timestamp for r in d.output_topic("out").read_records()] == [1000, 1010, 5]
        d.advance_wall_clock(500)
        assert d.wall_clock_ms == 1500
