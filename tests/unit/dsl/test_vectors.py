"""Every example of docs/semantics.md, through the TopologyTestDriver."""

from __future__ import annotations

from streamproc.dsl import EmitStrategy, SessionWindows, StreamsBuilder
from streamproc.records import Record, Windowed
from streamproc.testing import TopologyTestDriver
from tests.support.dsl import join_topology

SESSION_INPUT = [("1", 10), ("1", 15), ("1", 600), ("2", 600), ("2", 599)]


def _count_topology(emit: EmitStrategy):
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(500))
      .count(name="counts", emit=emit).to_stream().to("out"))
    return b.build()


def test_session_count_vector_on_window_update() -> None:
    with TopologyTestDriver(_count_topology(EmitStrategy.ON_WINDOW_UPDATE)) as d:
        for key, ts in SESSION_INPUT:
            d.input_topic("in").pipe(key, "x", ts)
        got = d.output_topic("out").read_records()
    assert got == [
        Record(Windowed("1", 10, 10), 1, 10),
        Record(Windowed("1", 10, 10), None, 10),
        Record(Windowed("1", 10, 15), 2, 15),
        Record(Windowed("1", 600, 600), 1, 600),
        Record(Windowed("2", 600, 600), 1, 600),
        Record(Windowed("2", 600, 600), None, 600),
        Record(Windowed("2", 599, 600), 2, 600),
    ]


def test_session_count_vector_on_window_close() -> None:
    with TopologyTestDriver(_count_topology(EmitStrategy.ON_WINDOW_CLOSE)) as d:
        for key, ts in SESSION_INPUT:
            d.input_topic("in").pipe(key, "x", ts)
        assert d.output_topic("out").read_records() == [Record(Windowed("1", 10, 15), 2, 15)]


def test_session_aggregate_vector_with_grace() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 20))
      .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a, b: a + b, name="agg")
      .to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        for key, value, ts in [("A", "a", 0), ("A", "b", 20), ("A", "c", 10)]:
            d.input_topic("in").pipe(key, value, ts)
        assert d.output_topic("out").read_records() == [
            Record(Windowed("A", 0, 0), "a", 0),
            Record(Windowed("A", 20, 20), "b", 20),
            Record(Windowed("A", 0, 0), None, 0),
            Record(Windowed("A", 20, 20), None, 20),
            Record(Windowed("A", 0, 20), "abc", 20),
        ]


def _join_vector(left: bool) -> list[Record]:
    b = StreamsBuilder()
    table = b.table("table", name="tbl", versioned=100)
    stream = b.stream("stream")
    joiner = lambda v, t: f"{v}+{t}"
    (stream.left_join(table, joiner) if left else stream.join(table, joiner)).to("out")
    with TopologyTestDriver(b.build()) as d:
        for value, ts in [("A", 10), ("C", 30), ("B", 20)]:
            d.input_topic("table").pipe("k", value, ts)
        for value, ts in [("s15", 15), ("s25", 25), ("s35", 35), ("s5", 5)]:
            d.input_topic("stream").pipe("k", value, ts)
        return d.output_topic("out").read_records()


def test_join_vector_inner() -> None:
    assert _join_vector(left=False) == [Record("k", "s15+A", 15), Record("k", "s25+B", 25), Record("k", "s35+C", 35)]


def test_join_vector_left() -> None:
    assert _join_vector(left=True) == [Record("k", "s15+A", 15), Record("k", "s25+B", 25), Record("k", "s35+C", 35),
                                       Record("k", "s5+None", 5)]


def test_versioned_store_vector_through_table_topic() -> None:
    with TopologyTestDriver(join_topology(left=False, history=100, grace=None)) as d:
        table = d.input_topic("table")
        store = d.versioned_store("tbl")
        for value, ts in [("a", 10), ("b", 20), ("c", 15)]:
            table.pipe("k", value, ts)
        assert store.get("k") == ("b", 20, None)
        assert store.get("k", 9) is None
        assert store.get("k", 14) == ("a", 10, 15)
        assert store.get("k", 17) == ("c", 15, 20)
        assert store.get("k", 25) == ("b", 20, None)
        table.pipe("k", None, 30)
        assert store.get("k") is None
        assert store.get("k", 25) == ("b", 20, 30)
        assert store.get("k", 35) is None


def test_session_store_kip_example_through_driver_store() -> None:
    with TopologyTestDriver(_count_topology(EmitStrategy.ON_WINDOW_UPDATE)) as d:
        store = d.session_store("counts")
        for start, end in [(0, 99), (101, 200), (201, 300), (301, 400)]:
            store.put(Windowed("k", start, end), 1)
        found = [kv.key for kv in store.find_sessions("k", 150, 300)]
        assert found == [Windowed("k", 101, 200), Windowed("k", 201, 300)]
