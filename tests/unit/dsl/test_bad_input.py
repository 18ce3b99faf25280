"""Bad input: clear ValueErrors at build time, ProcessingError at run time, dropped-record metrics."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from streamproc.dsl import EmitStrategy, Materialized, SessionWindows, StreamsBuilder
from streamproc.errors import ProcessingError
from streamproc.testing import TopologyTestDriver


@pytest.mark.parametrize("gap", [0, -1, timedelta(0)])
def test_gap_must_be_positive(gap) -> None:
    with pytest.raises(ValueError, match="gap of SessionWindows must"):
        SessionWindows.of_inactivity_gap_and_grace(gap, 10)
    with pytest.raises(ValueError, match="gap of SessionWindows must"):
        SessionWindows.of_inactivity_gap_with_no_grace(gap)


def test_grace_must_not_be_negative_and_durations_accept_timedelta() -> None:
    with pytest.raises(ValueError, match="grace of SessionWindows must not be negative, got -1 ms"):
        SessionWindows.of_inactivity_gap_and_grace(10, -1)
    w = SessionWindows.of_inactivity_gap_and_grace(timedelta(minutes=5), timedelta(seconds=1))
    assert (w.gap_ms, w.grace_ms) == (300_000, 1_000)


def test_retention_smaller_than_gap_plus_grace() -> None:
    b = StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(100, 50))
    with pytest.raises(ValueError, match=r"at least gap \+ grace = 100 \+ 50 = 150 ms, got 149 ms"):
        windowed.count(name="c", retention=149)
    with pytest.raises(ValueError, match="got 10 ms"):
        windowed.count(name="c2", materialized=Materialized(retention=10))
    windowed.count(name="ok", retention=150)


def _join_setup(versioned):
    b = StreamsBuilder()
    table = b.table("rates", name="rates", versioned=versioned)
    return b.stream("payments"), table


def test_grace_on_a_non_versioned_table() -> None:
    stream, table = _join_setup(None)
    with pytest.raises(ValueError, match="needs a versioned table, but table 'rates' is not versioned"):
        stream.join(table, lambda a, b: a, grace=10)
    with pytest.raises(ValueError, match="needs a versioned table"):
        stream.left_join(table, lambda a, b: a, grace=0)


def test_grace_larger_than_history_retention() -> None:
    stream, table = _join_setup(100)
    with pytest.raises(ValueError, match="got grace=101 ms, history retention=100 ms"):
        stream.join(table, lambda a, b: a, grace=101)
    stream.join(table, lambda a, b: a, grace=100)


def test_two_operators_with_the_same_name() -> None:
    b = StreamsBuilder()
    s = b.stream("in")
    w = s.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10))
    w.count(name="counts")
    with pytest.raises(ValueError, match="name 'counts' .* is already used"):
        w.count(name="counts")
    s.filter(lambda k, v: True, name="f")
    with pytest.raises(ValueError, match="name 'f' .* is already used"):
        s.map_values(str, name="f")
    with pytest.raises(ValueError, match="already used"):
        b.table("t", name="counts")


def test_missing_serde_in_strict_mode() -> None:
    b = StreamsBuilder(default_serde=None)
    grouped = b.stream("in").group_by_key()
    with pytest.raises(ValueError, match="key of session store 'c' needs a serde"):
        grouped.windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count(name="c")
    from streamproc import serde
    b2 = StreamsBuilder(default_serde=None)
    b2.stream("in", key_serde=serde.STRING).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)).count(name="c")  # count has an int serde
    with pytest.raises(ValueError, match="value of session store 'r' needs a serde"):
        b2.stream("in2", key_serde=serde.STRING).group_by_key().windowed_by(
            SessionWindows.of_inactivity_gap_with_no_grace(10)).aggregate(list, lambda k, v, a: a, lambda k, a, b: a,
                                                                          name="r")
    b3 = StreamsBuilder(default_serde=None)
    with pytest.raises(ValueError, match="key of repartition topic 'g-repartition' needs a serde"):
        b3.stream("in").select_key(lambda k, v: v).group_by_key(name="g").windowed_by(
            SessionWindows.of_inactivity_gap_with_no_grace(10)).count()


def test_bad_serde_and_bad_functions() -> None:
    b = StreamsBuilder()
    with pytest.raises(ValueError, match="key_serde of stream\\(\\) must be a streamproc.serde.Serde"):
        b.stream("in", key_serde=42)
    with pytest.raises(ValueError, match="unknown serde 'yaml'"):
        b.stream("in", value_serde="yaml")
    s = b.stream("in")
    with pytest.raises(ValueError, match="predicate of filter\\(\\) must be callable"):
        s.filter(None)
    with pytest.raises(ValueError, match="emit must be an EmitStrategy"):
        s.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(1)).count(emit="close")
    with pytest.raises(ValueError, match="windowed_by\\(\\) takes SessionWindows"):
        s.group_by_key().windowed_by(100)


def test_topic_read_twice_is_rejected() -> None:
    b = StreamsBuilder()
    b.stream("in")
    with pytest.raises(ValueError, match="topic 'in' is already a source"):
        b.stream(["other", "in"])


def test_piping_into_an_unknown_topic_names_it_and_lists_known_topics() -> None:
    b = StreamsBuilder()
    b.stream("clicks").to("out")
    with TopologyTestDriver(b.build()) as d:
        with pytest.raises(ValueError, match=r"cannot pipe into topic 'clikcs'.*input topics: \['clicks'\]"):
            d.input_topic("clikcs").pipe("k", "v", 1)
        with pytest.raises(ValueError, match=r"'nope' is not an output.*\['out'\]"):
            d.output_topic("nope")
        with pytest.raises(ValueError, match="no store 'x'"):
            d.session_store("x")


def test_store_accessor_checks_the_kind() -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(1)).count(name="c")
    with TopologyTestDriver(b.build()) as d:
        assert d.session_store("c").kind == "session"
        with pytest.raises(ValueError, match="store 'c' is a session store, not a key-value store"):
            d.key_value_store("c")


def test_aggregator_error_reports_key_topic_partition_offset_and_leaves_state() -> None:
    def aggregator(key, value, agg):
        if value == "boom":
            raise RuntimeError("bad value")
        return agg + [value]

    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).aggregate(
        list, aggregator, lambda k, a, b: a + b, name="agg").to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        topic = d.input_topic("in")
        topic.pipe("u1", "ok", 1)
        topic.pipe("u2", "ok", 2)
        with pytest.raises(ProcessingError) as info:
            topic.pipe("u1", "boom", 3)
        err = info.value
        assert (err.key, err.topic, err.partition, err.offset, err.operator) == ("u1", "in", 0, 2, "agg")
        assert "RuntimeError: bad value" in str(err) and "'u1'" in str(err)
        assert [kv.value for kv in d.session_store("agg").fetch("u1")] == [["ok"]]


@pytest.mark.parametrize("emit", list(EmitStrategy))
def test_none_keys_and_late_records_are_dropped_counted_and_logged_once(emit, caplog) -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count(
        name="c", emit=emit).to_stream().to("out")
    with caplog.at_level(logging.WARNING, logger="streamproc"), TopologyTestDriver(b.build()) as d:
        topic = d.input_topic("in")
        topic.pipe(None, "v", 1)
        topic.pipe(None, "v", 2)
        topic.pipe("k", "v", 100)
        topic.pipe("j", "v", 50)   # 50 < close time 100 - 10: late
        topic.pipe("j", "v", 89)   # end 89 < 90: late
        topic.pipe("j", "v", 90)   # not late
        m = d.metrics
    assert m["dropped_records_null_key"] == 2
    assert m["dropped_records_late"] == 2
    assert m["dropped_records"] == 4
    assert m["records_in"] == 6
    assert len([r for r in caplog.records if "None key" in r.getMessage()]) == 1


def test_source_serde_failure_names_the_record_position() -> None:
    from streamproc import serde
    from streamproc.engine.task import Task
    from streamproc.errors import SerializationError
    from streamproc.records import Record

    b = StreamsBuilder()
    b.stream("in", value_serde=serde.JSON).to("out")
    task = Task(b.build(), 0, 2, "app")
    with pytest.raises(SerializationError, match=r"json serde cannot deserialize .*in\[2\]@41"):
        task.process("in", 2, [Record(b"k", b"{not json", 1, topic="in", partition=2, offset=41)])
    with pytest.raises(ValueError, match=r"does not read topic 'nope'"):
        task.process("nope", 2, [])


def test_materialized_may_be_given_positionally_once() -> None:
    """``count(Materialized(...))`` as in Kafka Streams; given twice it is a ValueError."""
    from streamproc.dsl import TimeWindows

    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count(
        Materialized(name="sess", retention=500)).to_stream().to("out")
    grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5)).reduce(
        lambda a, v: a + v, Materialized(name="tw", retention=700)).to_stream().to("out2")
    text = b.build().describe()
    assert "sess (session, retention=500 ms" in text and "retention=700 ms" in text
    with pytest.raises(ValueError, match="given both positionally"):
        grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 5)).count(
            Materialized(name="x"), materialized=Materialized(name="y"))


def test_join_errors_name_the_table_by_its_topic_not_its_internal_store() -> None:
    b = StreamsBuilder()
    rates = b.table("t", versioned=100)
    with pytest.raises(ValueError, match=r"grace of join\(\) with table 't' must not exceed") as err:
        b.stream("payments").join(rates, lambda a, b: a, grace=101)
    assert "STATE-STORE" not in str(err.value)
    named = b.table("t2", name="fx")
    with pytest.raises(ValueError, match=r"needs a versioned table, but table 'fx' \(topic 't2'\) is not versioned"):
        b.stream("orders").join(named, lambda a, b: a, grace=1)


def _divide(value: int) -> int:
    return 100 // value  # the line the error must name


def test_a_user_function_that_raises_is_named_by_its_file_and_line() -> None:
    import inspect
    import traceback

    b = StreamsBuilder()
    b.stream("in").map_values(lambda v: _divide(v)).to("out")
    line = inspect.getsourcelines(test_a_user_function_that_raises_is_named_by_its_file_and_line)[1] + 5
    with TopologyTestDriver(b.build()) as driver, pytest.raises(ProcessingError) as info:
        driver.input_topic("in").pipe("k", 0)
    message = str(info.value)
    assert f"(in <lambda> at tests/unit/dsl/test_bad_input.py:{line}; record key 'k')" in message, message
    assert "raised ZeroDivisionError" in message
    # the cause's traceback reaches the user's own line
    frames = traceback.extract_tb(info.value.__cause__.__traceback__)
    assert frames[-1].name == "_divide" and "the line the error must name" in (frames[-1].line or "")
