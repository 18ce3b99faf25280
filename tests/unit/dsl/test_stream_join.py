"""Windowed stream-stream joins: JoinWindows, vectors for inner/left/outer joins (output timestamps,
unmatched records only after the window closed, late records, None keys), the stores and their
changelogs, names, describe(), repartitioning, dispatch next to the stream-table join, bad input."""

from __future__ import annotations

import struct
from datetime import timedelta

import pytest

from streamproc import serde
from streamproc.dsl import Joined, JoinWindows, StreamsBuilder
from streamproc.engine.task import Task
from streamproc.errors import ProcessingError
from streamproc.records import Record
from streamproc.testing import TopologyTestDriver


def _topology(kind="join", windows=None, name="j", **source_serdes):
    b = StreamsBuilder()
    views, clicks = b.stream("views", **source_serdes), b.stream("clicks", **source_serdes)
    windows = windows or JoinWindows.of_time_difference_with_no_grace(10)
    getattr(views, kind)(clicks, lambda v, c: f"{v}+{c}", windows, name=name).to("out")
    return b.build()


def _run(d, events):
    for topic, key, value, ts in events:
        d.input_topic(topic).pipe(key, value, ts)
    return [(r.key, r.value, r.timestamp) for r in d.output_topic("out").read_records()]


# -- definitions --------------------------------------------------------------------------------

def test_join_windows() -> None:
    w = JoinWindows.of_time_difference_and_grace(timedelta(minutes=10), timedelta(seconds=30))
    assert (w.before_ms, w.after_ms, w.grace_ms) == (600_000, 600_000, 30_000)
    assert JoinWindows.of_time_difference_with_no_grace(5).before(2) == JoinWindows(2, 5, 0)
    assert JoinWindows.of_time_difference_with_no_grace(5).after(0) == JoinWindows(5, 0, 0)
    with pytest.raises(ValueError, match="time_difference of JoinWindows must not be negative, got -1 ms"):
        JoinWindows.of_time_difference_and_grace(-1, 0)
    with pytest.raises(ValueError, match="grace of JoinWindows must not be negative"):
        JoinWindows.of_time_difference_and_grace(1, -1)
    with pytest.raises(ValueError, match="before of JoinWindows must not be negative"):
        JoinWindows.of_time_difference_with_no_grace(1).before(-1)


# -- vectors ------------------------------------------------------------------------------------

EVENTS = [
    ("views", "ann", "v1", 100),
    ("clicks", "ann", "c1", 105),     # |105 - 100| <= 10: joins v1
    ("views", "bob", "v2", 110),
    ("clicks", "ann", "c2", 101),     # joins v1 (out of order: stream time is 110, its window is open)
    ("clicks", "cat", "c3", 112),
    ("views", "ann", "v3", 114),      # joins c1 (|114 - 105| <= 10), not c2 (13 apart)
    ("views", "bob", "v4", 130),      # stream time 130
    ("clicks", "bob", "c4", 119),     # 119 < 130 - (10 + 0): late for the right side, dropped
]


def test_inner_join_vector() -> None:
    with TopologyTestDriver(_topology("join")) as d:
        assert _run(d, EVENTS) == [("ann", "v1+c1", 105), ("ann", "v1+c2", 101), ("ann", "v3+c1", 114)]
        assert d.metrics["dropped_records_late"] == 1


def test_left_join_emits_unmatched_views_only_once_their_window_closed() -> None:
    with TopologyTestDriver(_topology("left_join")) as d:
        assert _run(d, EVENTS[:6]) == [("ann", "v1+c1", 105), ("ann", "v1+c2", 101), ("ann", "v3+c1", 114)]
        # v2 (bob, 110) is unmatched, but a click accepted at stream time <= 130 (>= 120) could still
        # join it: it is final only once stream time passes 110 + 10 + 10 + 0
        assert _run(d, EVENTS[6:]) == []
        assert _run(d, [("clicks", "dan", "c5", 131)]) == [("bob", "v2+None", 110)]
        assert _run(d, [("clicks", "dan", "c6", 150)]) == []     # v4 (130) is final after stream time 150
        assert _run(d, [("clicks", "dan", "c7", 151)]) == [("bob", "v4+None", 130)]


def test_outer_join_also_emits_unmatched_clicks_in_timestamp_order() -> None:
    with TopologyTestDriver(_topology("outer_join")) as d:
        out = _run(d, EVENTS + [("views", "eve", "v5", 133)])      # passes 110 + 20 and 112 + 20
        assert out == [("ann", "v1+c1", 105), ("ann", "v1+c2", 101), ("ann", "v3+c1", 114),
                       ("bob", "v2+None", 110), ("cat", "None+c3", 112)]


def test_asymmetric_windows_and_grace() -> None:
    # a click may be up to 5 before or 0 after the view; records up to 3 late are accepted
    windows = JoinWindows.of_time_difference_and_grace(5, 3).after(0)
    with TopologyTestDriver(_topology("left_join", windows)) as d:
        assert _run(d, [("views", "k", "v1", 10), ("clicks", "k", "c1", 11), ("clicks", "k", "c2", 6),
                        ("clicks", "x", "c3", 13)]) == [("k", "v1+c2", 10)]
        assert _run(d, [("views", "k", "v2", 11), ("clicks", "x", "c4", 14)]) == [("k", "v2+c2", 11),
                                                                                  ("k", "v2+c1", 11)]
        assert _run(d, [("views", "k", "v3", 10)]) == []        # 10 < 14 - (0 + 3): late
        assert d.metrics["dropped_records_late"] == 1


def test_duplicates_join_every_partner_and_output_takes_the_later_timestamp() -> None:
    with TopologyTestDriver(_topology("join")) as d:
        out = _run(d, [("views", "k", "v1", 20), ("views", "k", "v2", 20), ("clicks", "k", "c1", 25),
                       ("clicks", "k", "c2", 15), ("views", "k", "v3", 18)])
        assert out == [("k", "v1+c1", 25), ("k", "v2+c1", 25), ("k", "v1+c2", 20), ("k", "v2+c2", 20),
                       ("k", "v3+c2", 18), ("k", "v3+c1", 25)]


def test_none_keys_and_values() -> None:
    events = [("views", None, "v1", 5), ("clicks", None, "c1", 6), ("views", "k", None, 7)]
    with TopologyTestDriver(_topology("join")) as d:
        assert _run(d, events) == []
        m = d.metrics
        assert (m["dropped_records_null_key"], m["dropped_records_null_value"]) == (2, 1)
    with TopologyTestDriver(_topology("left_join")) as d:
        assert _run(d, events) == [(None, "v1+None", 5)]     # joined with None at once
    with TopologyTestDriver(_topology("outer_join")) as d:
        assert _run(d, events) == [(None, "v1+None", 5), (None, "None+c1", 6)]


def test_self_join_pairs_every_record_with_itself_and_the_others() -> None:
    b = StreamsBuilder()
    s = b.stream("in")
    s.join(s, lambda a, c: a + c, JoinWindows.of_time_difference_with_no_grace(5), name="self").to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("in").pipe("k", "a", 1)
        d.input_topic("in").pipe("k", "b", 3)
        assert d.output_topic("out").read_values() == ["aa", "ba", "ab", "bb"]


def test_a_raising_joiner_leaves_the_buffers_unchanged() -> None:
    b = StreamsBuilder()

    def joiner(v, c):
        if c == "bad":
            raise KeyError(c)
        return (v, c)

    b.stream("views").join(b.stream("clicks"), joiner, JoinWindows.of_time_difference_with_no_grace(10),
                           name="j").to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("clicks").pipe("k", "bad", 5)
        with pytest.raises(ProcessingError, match="joiner of operator 'j-this' raised KeyError"):
            d.input_topic("views").pipe("k", "v", 6)
        assert list(d.window_store("j-this-join-store").all()) == []
        assert len(d.window_store("j-other-join-store").inner) == 1


# -- stores, changelogs, names, describe ------------------------------------------------------------

def test_stores_changelogs_and_describe() -> None:
    windows = JoinWindows.of_time_difference_and_grace(600_000, 60_000)
    topology = _topology("left_join", windows, name="views-clicks")
    sub, = topology.subtopologies_for("app")
    assert sub.source_topics == {"views", "clicks"}
    assert sub.changelog_topics == {
        "views-clicks-this-join-store": "app-views-clicks-this-join-store-changelog",
        "views-clicks-other-join-store": "app-views-clicks-other-join-store-changelog",
        "views-clicks-outer-shared-join-store": "app-views-clicks-outer-shared-join-store-changelog",
    }
    retention = 600_000 + 600_000 + 60_000 + 1     # before + after + grace + 1
    assert sub.changelog_configs["app-views-clicks-this-join-store-changelog"] == {
        "cleanup.policy": "compact,delete", "retention.ms": str(retention + 86_400_000)}
    assert sub.changelog_configs["app-views-clicks-outer-shared-join-store-changelog"] == {"cleanup.policy": "compact"}
    text = topology.describe()
    assert "Processor: views-clicks-this (left-join (left side); stores: [views-clicks-this-join-store, " \
           "views-clicks-other-join-store, views-clicks-outer-shared-join-store])" in text
    assert "Processor: views-clicks (left-join-merge)" in text
    assert f"views-clicks-this-join-store (window, retention={retention} ms, window size=1 ms, duplicates" in text
    inner = _topology("join", windows, name="j")
    assert sorted(inner.stores) == ["j-other-join-store", "j-this-join-store"]
    b = StreamsBuilder()
    b.stream("a").outer_join(b.stream("b"), lambda x, y: x, JoinWindows.of_time_difference_with_no_grace(1))
    assert sorted(b.build().stores) == ["KSTREAM-OUTERJOIN-0000000002-other-join-store",
                                        "KSTREAM-OUTERJOIN-0000000002-outer-shared-join-store",
                                        "KSTREAM-OUTERJOIN-0000000002-this-join-store"]


def test_buffer_changelog_keys_carry_start_and_sequence_number() -> None:
    topology = _topology("left_join", key_serde=serde.STRING, value_serde=serde.STRING)
    task = Task(topology, 0, 0, "app")
    task.process("views", 0, [Record(b"ann", b"v1", 100, offset=0), Record(b"ann", b"v2", 100, offset=1)])
    logs = task.drain_changelogs()
    keys = [r.key for r in logs["app-j-this-join-store-changelog"]]
    assert [k[:3] for k in keys] == [b"ann", b"ann"]
    assert [struct.unpack(">qi", k[3:]) for k in keys] == [(100, 1), (100, 2)]
    (unmatched,) = logs["app-j-outer-shared-join-store-changelog"]   # both views, one entry
    assert unmatched.key == struct.pack(">Bq", 0, 100) + b"ann"
    fresh = Task(topology, 0, 0, "app")
    for topic, records in logs.items():
        fresh.restore(topic, records)
    fresh.process("views", 0, [Record(b"bob", b"v3", 121, offset=2)])     # 121 > 100 + 10 + 10
    assert [(o.key, o.value, o.timestamp) for o in fresh.drain_outputs()] == [
        ("ann", "v1+None", 100), ("ann", "v2+None", 100)]


def test_a_rekeyed_side_is_repartitioned_with_the_other_sides_key_serde() -> None:
    b = StreamsBuilder()
    views = b.stream("views", key_serde=serde.STRING, value_serde=serde.JSON)
    clicks = b.stream("clicks", key_serde=serde.STRING, value_serde=serde.JSON)
    (clicks.select_key(lambda k, v: v["user"])
     .join(views, lambda c, v: [c["ad"], v["page"]], JoinWindows.of_time_difference_with_no_grace(10), name="j")
     .to("out", key_serde=serde.STRING, value_serde=serde.JSON))
    topology = b.build()
    subs = topology.subtopologies_for("app")
    assert len(subs) == 2
    joining = next(s for s in subs if "views" in s.source_topics)
    assert joining.repartition_topics == {"app-j-left-repartition"}
    assert topology.sink_serdes("app-j-left-repartition", "app")[0] is serde.STRING
    with TopologyTestDriver(topology, application_id="app") as d:
        d.input_topic("views").pipe("ann", {"page": "/"}, 10)
        d.input_topic("clicks").pipe("device-1", {"user": "ann", "ad": "shoes"}, 12)
        assert [(r.key, r.value, r.timestamp) for r in d.output_topic("out").read_records()] == [
            ("ann", ["shoes", "/"], 12)]


# -- dispatch and bad input -----------------------------------------------------------------------

def test_stream_table_join_still_works_next_to_stream_stream_joins() -> None:
    b = StreamsBuilder()
    rates = b.table("rates", name="rates", versioned=100)
    payments = b.stream("payments")
    payments.join(rates, lambda p, r: p * r, grace=5, name="tj").to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("rates").pipe("USD", 2, 0)
        d.input_topic("payments").pipe("USD", 10, 3)
        d.input_topic("payments").pipe("USD", 1, 9)
        assert d.output_topic("out").read_values() == [20]


def test_bad_join_arguments() -> None:
    b = StreamsBuilder()
    views, clicks = b.stream("views"), b.stream("clicks")
    table = b.table("rates", versioned=10)
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    with pytest.raises(ValueError, match=r"join\(\) of two streams needs JoinWindows .* got NoneType None"):
        views.join(clicks, lambda a, c: a)
    with pytest.raises(ValueError, match=r"needs JoinWindows .* got int 5"):
        views.left_join(clicks, lambda a, c: a, 5)
    with pytest.raises(ValueError, match="with a table takes grace= .* not JoinWindows"):
        views.join(table, lambda a, c: a, windows)
    with pytest.raises(ValueError, match="got JoinWindows twice"):
        views.join(clicks, lambda a, c: a, windows, windows=windows)
    with pytest.raises(ValueError, match="joiner of outer_join\\(\\) must be callable"):
        views.outer_join(clicks, "nope", windows)
    with pytest.raises(ValueError, match="takes its grace from the JoinWindows"):
        views.join(clicks, lambda a, c: a, windows, joined=Joined(grace=5))
    with pytest.raises(ValueError, match="needs a KStream of the same StreamsBuilder"):
        views.outer_join(StreamsBuilder().stream("x"), lambda a, c: a, windows)
    views.join(clicks, lambda a, c: a, windows=windows, name="ok")
    with pytest.raises(ValueError, match="name 'ok' of join\\(\\) is already used"):
        views.join(clicks, lambda a, c: a, windows, name="ok")
