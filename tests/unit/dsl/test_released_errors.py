"""Errors in records released from buffers blame those records (issue 19, item 3; docs/semantics.md,
"Errors in records released from buffers").

A record that fails only when released from a grace buffer (stream-table join with grace) or as an
unmatched record of an outer stream-stream join (emitted later with a None partner) is reported with
its own position and bytes: raised from the driver by default (``released_error_policy="fail"``),
dead-lettered with ``"dead-letter"``, handed to ``Task.released_error_handler`` on the task; also
after a restart from the changelogs.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamproc import serde
from streamproc.dsl import JoinWindows, StreamsBuilder, Topology
from streamproc.engine.task import Task
from streamproc.errors import ProcessingError
from streamproc.processors.origin import UNKNOWN_ORIGIN, Origin
from streamproc.processors.serdes import buffered_value_serde
from streamproc.processors.stream_join import unmatched_value_serde
from streamproc.testing import TopologyTestDriver


def _joiner(v: Any, other: Any) -> Any:
    if v == {"bad": True}:
        raise ValueError("cannot join a bad record")
    return [v, other]


def stream_table(grace: int = 10) -> Topology:
    b = StreamsBuilder()
    table = b.table("rates", key_serde=serde.STRING, value_serde=serde.JSON, name="rates", versioned=100)
    (b.stream("payments", key_serde=serde.STRING, value_serde=serde.JSON)
     .left_join(table, _joiner, grace=grace, name="j")
     .to("out", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


def stream_stream() -> Topology:
    b = StreamsBuilder()
    left = b.stream("views", key_serde=serde.STRING, value_serde=serde.JSON)
    right = b.stream("clicks", key_serde=serde.STRING, value_serde=serde.JSON)
    (left.left_join(right, _joiner, JoinWindows.of_time_difference_with_no_grace(10), name="j")
     .to("out", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


# the bad record is offset 1 of its topic; it is released by the record at offset 3 (ts 100)
STREAM_TABLE_INPUT = [("payments", "a", {"n": 1}, 10), ("payments", "b", {"bad": True}, 11),
                      ("rates", "a", 1.5, 5), ("payments", "c", {"n": 3}, 100)]
STREAM_STREAM_INPUT = [("views", "a", {"n": 1}, 10), ("views", "b", {"bad": True}, 11),
                       ("clicks", "a", {"c": 1}, 12), ("views", "c", {"n": 3}, 100)]


def _pipe(d: TopologyTestDriver, records: list[tuple[str, str, Any, int]]) -> None:
    for topic, key, value, ts in records:
        d.input_topic(topic).pipe(key, value, ts, headers=[("trace", f"{topic}-{key}".encode())])


@pytest.mark.parametrize("topology, records, topic", [(stream_table, STREAM_TABLE_INPUT, "payments"),
                                                      (stream_stream, STREAM_STREAM_INPUT, "views")])
def test_by_default_the_error_names_the_released_record(topology: Any, records: Any, topic: str) -> None:
    with TopologyTestDriver(topology()) as d:
        _pipe(d, records[:3])
        with pytest.raises(ProcessingError) as info:
            _pipe(d, records[3:])
    err = info.value
    assert (err.topic, err.partition, err.offset, err.key) == (topic, 0, 1, "b")
    assert f"at {topic}[0]@1" in str(err) and "released later from the buffer of operator 'j" in str(err)
    assert "released by the record at" in str(err)


@pytest.mark.parametrize("topology, records, topic", [(stream_table, STREAM_TABLE_INPUT, "payments"),
                                                      (stream_stream, STREAM_STREAM_INPUT, "views")])
def test_dead_letter_writes_the_released_record_with_its_own_bytes_and_position(topology: Any, records: Any,
                                                                                topic: str) -> None:
    with TopologyTestDriver(topology(), application_id="app", released_error_policy="dead-letter") as d:
        _pipe(d, records)
        (dead,) = d.output_topic("app-dlq").read_records()
        out = d.output_topic("out").read_records()
        (err, origin), = d.released_errors
    assert (dead.key, dead.value, dead.timestamp) == (b"b", b'{"bad":true}', 11)   # as fetched: bytes
    headers = dict(dead.headers)
    assert headers["trace"] == f"{topic}-b".encode()
    assert (headers["streamproc.error.topic"], headers["streamproc.error.partition"],
            headers["streamproc.error.offset"]) == (topic.encode(), b"0", b"1")
    assert headers["streamproc.error.class"] == b"ProcessingError"
    assert (origin.topic, origin.partition, origin.offset, origin.key, origin.value) == (topic, 0, 1, b"b",
                                                                                         b'{"bad":true}')
    assert err.offset == 1
    # the record that released it was processed, and the others came out
    assert {r.key for r in out} >= {"a"}
    assert "b" not in {r.key for r in out}


def test_skip_goes_on_and_records_the_error() -> None:
    with TopologyTestDriver(stream_table(), released_error_policy="skip") as d:
        _pipe(d, STREAM_TABLE_INPUT)
        assert [r.key for r in d.output_topic("out").read_records()] == ["a"]
        assert [(o.topic, o.offset) for _, o in d.released_errors] == [("payments", 1)]
        assert "app-dlq" not in d.output_topics()


@pytest.mark.parametrize("topology, records, topic", [(stream_table, STREAM_TABLE_INPUT, "payments"),
                                                      (stream_stream, STREAM_STREAM_INPUT, "views")])
def test_the_origin_survives_a_restart(topology: Any, records: Any, topic: str) -> None:
    with TopologyTestDriver(topology()) as d:
        _pipe(d, records[:3])
        logs = d.changelogs()
    with TopologyTestDriver(topology(), changelogs=logs, released_error_policy="dead-letter") as d2:
        _pipe(d2, records[3:])
        (dead,) = d2.output_topic("t-dlq").read_records()
    assert (dead.key, dead.value, dead.timestamp) == (b"b", b'{"bad":true}', 11)
    assert dict(dead.headers)["streamproc.error.offset"] == b"1"
    assert dict(dead.headers)["trace"] == f"{topic}-b".encode()


def test_the_task_hook_gets_the_error_and_the_origin() -> None:
    from streamproc.records import Record

    task = Task(stream_stream(), 0, 0, "app")
    seen: list[tuple[ProcessingError, Any]] = []
    task.released_error_handler = lambda exc, origin: seen.append((exc, origin))
    for offset, (topic, key, value, ts) in enumerate(STREAM_STREAM_INPUT):
        raw = serde.JSON.serialize(value)
        task.process(topic, 3, [Record(key.encode(), raw, ts, (("h", b"1"),), topic, 3, 40 + offset)])
    outputs = task.drain_outputs()
    ((exc, origin),) = seen
    assert isinstance(origin, Origin)
    assert (origin.topic, origin.partition, origin.offset, origin.timestamp) == ("views", 3, 41, 11)
    assert (origin.key, origin.value, origin.headers) == (b"b", b'{"bad":true}', (("h", b"1"),))
    assert (exc.topic, exc.partition, exc.offset, exc.operator) == ("views", 3, 41, "j-this")
    assert [o.key for o in outputs] == [b"a"]   # a joined its click; b failed; c is not final yet


def test_changelog_values_written_before_origins_restore_with_an_unknown_origin() -> None:
    buffered = buffered_value_serde(serde.JSON)
    assert buffered.deserialize(b'{"n":1}') == ({"n": 1}, UNKNOWN_ORIGIN)
    origin = Origin("t", 2, 7, 5, b"k", None, (("h", b"v"),))
    assert buffered.deserialize(buffered.serialize(({"n": 1}, origin))) == ({"n": 1}, origin)
    unmatched = unmatched_value_serde(serde.JSON, serde.JSON)
    old = bytes((1,)) + (3).to_bytes(4, "big") + b'"x"'
    assert unmatched.deserialize(old) == (1, (("x", UNKNOWN_ORIGIN),))
    assert unmatched.deserialize(unmatched.serialize((0, (("x", origin), ("y", origin))))) == \
        (0, (("x", origin), ("y", origin)))


def test_a_bad_policy_name_is_refused() -> None:
    with pytest.raises(ValueError, match="released_error_policy must be one of"):
        TopologyTestDriver(stream_table(), released_error_policy="ignore")


def test_an_operator_downstream_failing_on_a_released_result_blames_the_released_record() -> None:
    def check(v: Any) -> Any:
        if v[0] == {"n": 2}:
            raise ValueError("downstream cannot take n=2")
        return v

    b = StreamsBuilder()
    table = b.table("rates", key_serde=serde.STRING, value_serde=serde.JSON, name="rates", versioned=100)
    (b.stream("payments", key_serde=serde.STRING, value_serde=serde.JSON)
     .left_join(table, lambda v, t: [v, t], grace=10, name="j")
     .map_values(check, name="check")
     .to("out", key_serde=serde.STRING, value_serde=serde.JSON))
    with TopologyTestDriver(b.build(), released_error_policy="dead-letter") as d:
        _pipe(d, [("payments", "a", {"n": 1}, 10), ("payments", "b", {"n": 2}, 11), ("payments", "c", {"n": 3}, 100)])
        (dead,) = d.output_topic("t-dlq").read_records()
        ((err, _),) = d.released_errors
    assert (dead.key, dead.value, dict(dead.headers)["streamproc.error.offset"]) == (b"b", b'{"n":2}', b"1")
    assert err.operator == "check" and err.offset == 1
