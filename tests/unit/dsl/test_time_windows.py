"""Tumbling and hopping windows: definitions, vectors for both emit strategies (emit timestamps,
late records), the window store (contents, retention, changelog format), names, describe() and
bad input."""

from __future__ import annotations

import struct
from datetime import timedelta

import pytest

from streamproc import serde
from streamproc.dsl import EmitStrategy, Materialized, StreamsBuilder, TimeWindows, ValueAndTimestamp
from streamproc.engine.task import Task
from streamproc.errors import ProcessingError
from streamproc.processors.window_aggregate import timestamped_serde
from streamproc.records import Record, Windowed
from streamproc.testing import TopologyTestDriver


def _count_topology(windows, emit=EmitStrategy.ON_WINDOW_UPDATE, name="counts", **kwargs):
    b = StreamsBuilder()
    (b.stream("in", **kwargs).group_by_key().windowed_by(windows).count(name=name, emit=emit)
      .to_stream().to("out"))
    return b.build()


def _pipe(d, records):
    topic = d.input_topic("in")
    for key, ts in records:
        topic.pipe(key, "x", ts)
    return d.output_topic("out").read_records()


# -- definitions --------------------------------------------------------------------------------

def test_tumbling_and_hopping_windows_for_a_timestamp() -> None:
    tumbling = TimeWindows.of_size_with_no_grace(10)
    assert tumbling.windows_for(0) == [(0, 10)]
    assert tumbling.windows_for(9) == [(0, 10)]
    assert tumbling.windows_for(10) == [(10, 20)]
    hopping = TimeWindows.of_size_and_grace(10, 2).advance_by(4)
    assert hopping.windows_for(13) == [(4, 14), (8, 18), (12, 22)]
    assert hopping.windows_for(3) == [(0, 10)]          # starts are never negative
    assert hopping.windows_for(-1) == []
    assert (hopping.size, hopping.advance, hopping.grace_period, hopping.tumbling) == (10, 4, 2, False)
    assert tumbling.tumbling and TimeWindows.of_size_with_no_grace(10).advance_by(10) == tumbling


@pytest.mark.parametrize("size", [0, -1, timedelta(0)])
def test_size_must_be_positive(size) -> None:
    with pytest.raises(ValueError, match="size of TimeWindows must"):
        TimeWindows.of_size_and_grace(size, 0)


@pytest.mark.parametrize("advance", [0, 11, -1])
def test_advance_must_be_positive_and_at_most_the_size(advance) -> None:
    with pytest.raises(ValueError, match="advance of TimeWindows must"):
        TimeWindows.of_size_with_no_grace(10).advance_by(advance)


def test_grace_must_not_be_negative_and_durations_accept_timedelta() -> None:
    with pytest.raises(ValueError, match="grace of TimeWindows must not be negative, got -1 ms"):
        TimeWindows.of_size_and_grace(10, -1)
    w = TimeWindows.of_size_and_grace(timedelta(minutes=1), timedelta(seconds=5)).advance_by(timedelta(seconds=30))
    assert (w.size_ms, w.grace_ms, w.advance_ms) == (60_000, 5_000, 30_000)


def test_windowed_by_rejects_other_objects() -> None:
    with pytest.raises(ValueError, match="windowed_by\\(\\) takes SessionWindows or TimeWindows, got int 10"):
        StreamsBuilder().stream("in").group_by_key().windowed_by(10)


# -- vectors ------------------------------------------------------------------------------------

def test_tumbling_count_on_update_forwards_every_update_with_the_largest_timestamp_so_far() -> None:
    with TopologyTestDriver(_count_topology(TimeWindows.of_size_and_grace(10, 5))) as d:
        out = _pipe(d, [("a", 3), ("a", 8), ("a", 1), ("b", 12), ("a", 14), ("a", 7), ("a", 20), ("a", 9)])
        assert out == [
            Record(Windowed("a", 0, 10), 1, 3),
            Record(Windowed("a", 0, 10), 2, 8),
            Record(Windowed("a", 0, 10), 3, 8),     # out of order: the window's timestamp stays 8
            Record(Windowed("b", 10, 20), 1, 12),
            Record(Windowed("a", 10, 20), 1, 14),
            Record(Windowed("a", 0, 10), 4, 8),     # 14 - 5 < 10: still open
            Record(Windowed("a", 20, 30), 1, 20),
        ]                                           # ("a", 9): 20 - 5 >= 10, closed: dropped
        assert d.metrics["dropped_records_late"] == 1
        store = d.window_store("counts")
        assert store.get("a", 10) == ValueAndTimestamp(1, 14)
        assert store.get("a", 0) is None          # expired: start 0 <= observed 20 - retention (10 + 5)


def test_tumbling_count_on_close_emits_each_window_once_at_its_last_instant() -> None:
    windows = TimeWindows.of_size_and_grace(10, 5)
    with TopologyTestDriver(_count_topology(windows, EmitStrategy.ON_WINDOW_CLOSE)) as d:
        assert _pipe(d, [("a", 3), ("a", 8), ("b", 12), ("a", 1), ("a", 14)]) == []   # 14 - 5 < 10
        assert _pipe(d, [("b", 15)]) == [Record(Windowed("a", 0, 10), 3, 9)]           # 15 - 5 >= 10
        assert _pipe(d, [("a", 2), ("c", 24)]) == []                                  # 2: late; 24 - 5 < 20
        assert _pipe(d, [("c", 41)]) == [Record(Windowed("a", 10, 20), 1, 19),
                                         Record(Windowed("b", 10, 20), 2, 19),
                                         Record(Windowed("c", 20, 30), 1, 29)]
        assert d.metrics["dropped_records_late"] == 1


def test_hopping_count_updates_every_window_containing_the_record() -> None:
    windows = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    with TopologyTestDriver(_count_topology(windows)) as d:
        assert _pipe(d, [("a", 7), ("a", 12), ("a", 4)]) == [
            Record(Windowed("a", 0, 10), 1, 7), Record(Windowed("a", 5, 15), 1, 7),
            Record(Windowed("a", 5, 15), 2, 12), Record(Windowed("a", 10, 20), 1, 12),
        ]
        # 4 lies in [0,10) only, and stream time 12 >= 10 closed it: the record is late
        assert d.metrics["dropped_records_late"] == 1
        assert _pipe(d, [("a", 11)]) == [Record(Windowed("a", 5, 15), 3, 12), Record(Windowed("a", 10, 20), 2, 12)]


def test_a_record_late_for_some_hopping_windows_updates_the_open_ones() -> None:
    windows = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    with TopologyTestDriver(_count_topology(windows, EmitStrategy.ON_WINDOW_CLOSE)) as d:
        assert _pipe(d, [("a", 8), ("b", 11)]) == [Record(Windowed("a", 0, 10), 1, 9)]
        assert _pipe(d, [("a", 9)]) == []            # [0,10) closed, [5,15) open
        assert d.metrics["dropped_records_late"] == 0 and d.metrics["skipped_late_windows"] == 1
        assert _pipe(d, [("b", 30)]) == [Record(Windowed("a", 5, 15), 2, 14), Record(Windowed("b", 5, 15), 1, 14),
                                         Record(Windowed("b", 10, 20), 1, 19)]


def test_reduce_and_aggregate() -> None:
    b = StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
    windowed.reduce(lambda agg, v: agg + v, name="r").to_stream().to("reduced")
    windowed.aggregate(lambda: "", lambda k, v, agg: agg + v.upper(), name="g",
                       emit=EmitStrategy.ON_WINDOW_CLOSE).to_stream().to("aggregated")
    with TopologyTestDriver(b.build()) as d:
        for value, ts in [("a", 1), ("b", 2), ("c", 11)]:
            d.input_topic("in").pipe("k", value, ts)
        assert d.output_topic("reduced").read_values() == ["a", "ab", "c"]
        assert d.output_topic("aggregated").read_records() == [Record(Windowed("k", 0, 10), "AB", 9)]


def test_null_keys_and_negative_timestamps_are_dropped_and_counted() -> None:
    with TopologyTestDriver(_count_topology(TimeWindows.of_size_with_no_grace(10))) as d:
        assert _pipe(d, [(None, 5), ("a", -1)]) == []
        assert d.metrics["dropped_records_null_key"] == 1
        assert d.metrics["dropped_records_negative_timestamp"] == 1
        assert d.metrics["dropped_records"] == 2


def test_a_raising_aggregator_leaves_every_window_unchanged() -> None:
    b = StreamsBuilder()
    calls = []

    def aggregator(key, value, agg):
        calls.append(agg)
        if value == "boom" and len(calls) % 2 == 0:     # fails on the record's second window
            raise RuntimeError("bad value")
        return agg + 1

    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10).advance_by(5))
      .aggregate(lambda: 0, aggregator, name="agg").to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("in").pipe("k", "ok", 7)
        calls.clear()
        with pytest.raises(ProcessingError, match="aggregation function of operator 'agg' raised RuntimeError"):
            d.input_topic("in").pipe("k", "boom", 8)
        store = d.window_store("agg")
        assert (store.get("k", 0), store.get("k", 5)) == (ValueAndTimestamp(1, 7), ValueAndTimestamp(1, 7))


# -- store, retention, changelog, names -----------------------------------------------------------

def test_store_retention_defaults_to_size_plus_grace_and_a_smaller_one_is_rejected() -> None:
    def windowed(builder: StreamsBuilder | None = None):
        builder = builder or StreamsBuilder()
        return builder.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(100, 50))

    with pytest.raises(ValueError, match=r"at least size \+ grace = 100 \+ 50 = 150 ms, got 149 ms"):
        windowed().count(name="c", retention=149)
    with pytest.raises(ValueError, match="got 10 ms"):
        windowed().count(name="c", materialized=Materialized(retention=10))
    b_default = StreamsBuilder()
    windowed(b_default).count(name="c")
    assert b_default.build().stores["c"].retention_ms == 150
    b_longer = StreamsBuilder()
    windowed(b_longer).count(name="c", retention=timedelta(seconds=1))
    assert b_longer.build().stores["c"].retention_ms == 1_000


def test_describe_names_and_changelog_topics() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(60_000, 5_000).advance_by(30_000))
      .count(name="per-minute", emit=EmitStrategy.ON_WINDOW_CLOSE).to_stream().to("out"))
    topology = b.build(application_id="app")
    text = topology.describe()
    assert "Processor: per-minute (hopping-window-count (emit on window close); stores: [per-minute, " \
           "per-minute-progress])" in text
    assert "per-minute (window, retention=65000 ms, window size=60000 ms, changelog: app-per-minute-changelog)" \
        in text
    (sub,) = topology.subtopologies
    assert sub.changelog_topics == {"per-minute": "app-per-minute-changelog",
                                    "per-minute-progress": "app-per-minute-progress-changelog"}
    assert sub.changelog_configs["app-per-minute-changelog"] == {"cleanup.policy": "compact,delete",
                                                                 "retention.ms": str(65_000 + 86_400_000)}
    assert "flowchart" in topology.describe(format="mermaid")
    # generated names are deterministic
    b2 = StreamsBuilder()
    b2.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count().to_stream().to("o")
    assert sorted(b2.build().stores) == ["KSTREAM-AGGREGATE-0000000001"]


def test_changelog_records_are_key_bytes_plus_start_and_timestamped_values() -> None:
    topology = _count_topology(TimeWindows.of_size_with_no_grace(10), key_serde=serde.STRING)
    task = Task(topology, 0, 0, "app")
    task.process("in", 0, [Record(b"ann", b"x", 13, offset=0), Record(b"ann", b"y", 17, offset=1)])
    logs = task.drain_changelogs()
    (record,) = logs["app-counts-changelog"]               # de-duplicated per window
    assert record.key == b"ann" + struct.pack(">q", 10)
    assert timestamped_serde(serde.INT).deserialize(record.value) == ValueAndTimestamp(2, 17)
    assert record.value == struct.pack(">q", 17) + b"\x01" + struct.pack(">q", 2)
    assert record.timestamp == 17


def test_timestamped_serde_round_trips_and_reports_bad_bytes() -> None:
    s = timestamped_serde(serde.JSON)
    for vt in (ValueAndTimestamp({"a": [1, 2]}, 5), ValueAndTimestamp(None, -1), ValueAndTimestamp("", 0)):
        assert s.deserialize(s.serialize(vt)) == vt
    with pytest.raises(Exception, match="expected at least 9 bytes"):
        s.deserialize(b"\x00" * 3, "here")


def test_restore_with_serdes_keeps_windows_and_emit_progress() -> None:
    topology = _count_topology(TimeWindows.of_size_with_no_grace(10), EmitStrategy.ON_WINDOW_CLOSE,
                               key_serde=serde.STRING, value_serde=serde.STRING)
    with TopologyTestDriver(topology) as d:
        assert _pipe(d, [("a", 3), ("b", 12)]) == [Record(Windowed("a", 0, 10), 1, 9)]
        changelogs = d.changelogs()
    assert changelogs["counts-progress"][-1].key == b"last_emitted_close"
    with TopologyTestDriver(topology, changelogs=changelogs) as d2:
        assert d2.window_store("counts").get("b", 10) == ValueAndTimestamp(1, 12)
        assert _pipe(d2, [("a", 5), ("b", 19), ("c", 20)]) == [Record(Windowed("b", 10, 20), 2, 19)]
        assert d2.metrics["dropped_records_late"] == 1      # ("a", 5) after the restore: still late


def test_time_window_aggregate_with_a_merger_names_the_signature_time_windows_take() -> None:
    windowed = StreamsBuilder().stream("in").group_by_key().windowed_by(TimeWindows.of_size_and_grace(100, 50))
    with pytest.raises(ValueError, match=r"aggregate\(\) of time windows takes \(initializer, aggregator\).*"
                                         r"A merger is for session windows"):
        windowed.aggregate(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)  # type: ignore[arg-type]
