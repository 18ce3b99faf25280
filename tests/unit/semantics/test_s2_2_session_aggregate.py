"""docs/semantics.md, "Session windows": session-window aggregation through the DSL and the TopologyTestDriver."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc import EmitStrategy, SessionWindows, StreamsBuilder, TopologyTestDriver

from ._util import kvs, recs, seqs
from .models import SessionAggModel

_FIRST = object()


def _topology(windows: SessionWindows, op: str, emit: EmitStrategy, retention: Any = None) -> Any:
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key().windowed_by(windows)
    kw: dict[str, Any] = {"name": "agg", "emit": emit}
    if retention is not None:
        kw["retention"] = retention
    if op == "count":
        table = grouped.count(**kw)
    elif op == "reduce":
        table = grouped.reduce(lambda a, v: a + v, **kw)
    else:
        table = grouped.aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, a, b: a + b, **kw)
    table.to_stream().to("out")
    return b.build()


def _model(gap: int, grace: int, op: str, on_close: bool, retention: int | None = None) -> SessionAggModel:
    fns: tuple[Callable[..., Any], ...]
    if op == "count":
        fns = (lambda: 0, lambda k, v, agg: agg + 1, lambda k, a, b: a + b)
    elif op == "reduce":
        fns = (lambda: _FIRST, lambda k, v, agg: v if agg is _FIRST else agg + v,
               lambda k, a, b: b if a is _FIRST else a + b)
    else:
        fns = (lambda: "", lambda k, v, agg: agg + v, lambda k, a, b: a + b)
    return SessionAggModel(gap, grace, *fns, on_close=on_close, retention=retention)


def _run(windows: SessionWindows, op: str, emit: EmitStrategy, records: list[tuple]) -> list[tuple]:
    with TopologyTestDriver(_topology(windows, op, emit)) as d:
        for k, v, ts in records:
            d.input_topic("in").pipe(k, v, ts)
        return recs(d.output_topic("out").read_records())


# -- the vectors ---------------------------------------------------------------------------------

VECTOR = [("1", "x", 10), ("1", "x", 15), ("1", "x", 600), ("2", "x", 600), ("2", "x", 599)]


def test_vector_count_on_update() -> None:
    got = _run(SessionWindows.of_inactivity_gap_with_no_grace(500), "count", EmitStrategy.ON_WINDOW_UPDATE, VECTOR)
    assert got == [(("1", 10, 10), 1, 10), (("1", 10, 10), None, 10), (("1", 10, 15), 2, 15),
                   (("1", 600, 600), 1, 600), (("2", 600, 600), 1, 600), (("2", 600, 600), None, 600),
                   (("2", 599, 600), 2, 600)]


def test_vector_count_on_close() -> None:
    got = _run(SessionWindows.of_inactivity_gap_with_no_grace(500), "count", EmitStrategy.ON_WINDOW_CLOSE, VECTOR)
    assert got == [(("1", 10, 15), 2, 15)]


def test_vector_aggregate_with_grace() -> None:
    got = _run(SessionWindows.of_inactivity_gap_and_grace(10, 20), "aggregate", EmitStrategy.ON_WINDOW_UPDATE,
               [("A", "a", 0), ("A", "b", 20), ("A", "c", 10)])
    assert got == [(("A", 0, 0), "a", 0), (("A", 20, 20), "b", 20), (("A", 0, 0), None, 0),
                   (("A", 20, 20), None, 20), (("A", 0, 20), "abc", 20)]


def test_default_emit_is_on_window_update() -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5)) \
        .count(name="c").to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("in").pipe("k", 1, 0)
        d.input_topic("in").pipe("k", 1, 3)
        assert len(d.output_topic("out").read_records()) == 3


# -- the rules one by one ------------------------------------------------------------------------


def test_gap_is_inclusive() -> None:
    """Records exactly ``gap`` apart share a session; ``gap + 1`` apart do not."""
    w = SessionWindows.of_inactivity_gap_and_grace(10, 100)
    got = _run(w, "count", EmitStrategy.ON_WINDOW_UPDATE, [("k", 0, 0), ("k", 0, 10), ("k", 0, 21)])
    assert got == [(("k", 0, 0), 1, 0), (("k", 0, 0), None, 0), (("k", 0, 10), 2, 10), (("k", 21, 21), 1, 21)]


def test_late_boundary_and_drop_metric() -> None:
    """Late iff ``merged_end < close_time``; ``merged_end == close_time`` is accepted."""
    w = SessionWindows.of_inactivity_gap_and_grace(10, 5)
    with TopologyTestDriver(_topology(w, "count", EmitStrategy.ON_WINDOW_UPDATE)) as d:
        t = d.input_topic("in")
        t.pipe("a", 0, 100)  # stream time 100, close time 85
        t.pipe("b", 0, 85)  # end 85 == close: accepted
        t.pipe("c", 0, 84)  # end 84 < 85: late, dropped
        assert recs(d.output_topic("out").read_records()) == [(("a", 100, 100), 1, 100), (("b", 85, 85), 1, 85)]
        assert d.metrics["dropped_records"] == 1
        assert kvs(d.session_store("agg").fetch("c")) == []


def test_old_record_extending_open_session_is_accepted() -> None:
    """A record older than ``close_time`` that extends a still-open session is accepted."""
    w = SessionWindows.of_inactivity_gap_and_grace(10, 0)
    got = _run(w, "count", EmitStrategy.ON_WINDOW_UPDATE,
               [("k", 0, 95), ("k", 0, 100), ("j", 0, 110), ("k", 0, 89), ("k", 0, 84), ("k", 0, 70)])
    # after ("j", 110): close time 100. 89 < 100 but merges with [95,100] (end 100 == close): accepted;
    # 84 merges with [89,100]: accepted; 70 merges with nothing: [70,70] ends before 100: late.
    assert got == [(("k", 95, 95), 1, 95), (("k", 95, 95), None, 95), (("k", 95, 100), 2, 100),
                   (("j", 110, 110), 1, 110),
                   (("k", 95, 100), None, 100), (("k", 89, 100), 3, 100),
                   (("k", 89, 100), None, 100), (("k", 84, 100), 4, 100)]


def test_record_inside_existing_session_emits_tombstone_then_value() -> None:
    w = SessionWindows.of_inactivity_gap_and_grace(10, 100)
    got = _run(w, "aggregate", EmitStrategy.ON_WINDOW_UPDATE, [("k", "a", 0), ("k", "b", 8), ("k", "c", 4)])
    assert got[-2:] == [(("k", 0, 8), None, 8), (("k", 0, 8), "abc", 8)]


def test_same_timestamp_single_record_session_has_no_tombstone() -> None:
    """Step 4: when the merged window equals ``[ts, ts]`` no tombstone is forwarded."""
    w = SessionWindows.of_inactivity_gap_and_grace(10, 100)
    got = _run(w, "aggregate", EmitStrategy.ON_WINDOW_UPDATE, [("k", "a", 5), ("k", "b", 5)])
    assert got == [(("k", 5, 5), "a", 5), (("k", 5, 5), "ab", 5)]


def test_merge_of_three_sessions_uses_merger_in_order() -> None:
    """Found sessions are merged in ``find_sessions`` order (by end) starting from ``initializer()``."""
    calls: list[tuple] = []

    def merger(k: Any, a: str, b: str) -> str:
        calls.append((a, b))
        return a + b

    b = StreamsBuilder()
    b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(15, 100)) \
        .aggregate(lambda: "<", lambda k, v, agg: agg + v, merger, name="agg").to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        for v, ts in [("x", 0), ("z", 30), ("y", 15)]:
            d.input_topic("in").pipe("k", v, ts)
        out = recs(d.output_topic("out").read_records())
    assert calls == [("<", "<x"), ("<<x", "<z")]
    assert out[-3:] == [(("k", 0, 0), None, 0), (("k", 30, 30), None, 30), (("k", 0, 30), "<<x<zy", 30)]


def test_reduce_first_value_as_is() -> None:
    got = _run(SessionWindows.of_inactivity_gap_and_grace(15, 100), "reduce", EmitStrategy.ON_WINDOW_UPDATE,
               [("k", "a", 0), ("k", "b", 30), ("k", "c", 15)])
    assert got[0] == (("k", 0, 0), "a", 0)
    assert got[-1] == (("k", 0, 30), "abc", 30)


def test_none_keys_are_dropped_counted_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    w = SessionWindows.of_inactivity_gap_with_no_grace(10)
    with TopologyTestDriver(_topology(w, "count", EmitStrategy.ON_WINDOW_UPDATE)) as d:
        t = d.input_topic("in")
        with caplog.at_level(logging.DEBUG):
            t.pipe(None, 1, 0)
            first = [r for r in caplog.records if r.levelno >= logging.INFO]
            caplog.clear()
            t.pipe(None, 1, 1)
            t.pipe(None, 1, 2)
            later = [r for r in caplog.records if r.levelno >= logging.INFO]
        assert d.output_topic("out").read_records() == []
        assert d.metrics["dropped_records"] == 3
    assert len(first) == 1
    assert later == []


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda: SessionWindows.of_inactivity_gap_and_grace(0, 5), "gap"),
        (lambda: SessionWindows.of_inactivity_gap_and_grace(-1, 5), "gap"),
        (lambda: SessionWindows.of_inactivity_gap_and_grace(5, -1), "grace"),
        (lambda: SessionWindows.of_inactivity_gap_with_no_grace(0), "gap"),
        (lambda: SessionWindows.of_inactivity_gap_with_no_grace(timedelta(milliseconds=-3)), "gap"),
    ],
)
def test_window_validation(make: Any, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        make()


def test_retention_default_and_explicit() -> None:
    """Store retention defaults to ``gap + grace``; an explicit smaller retention is a ValueError."""
    w = SessionWindows.of_inactivity_gap_and_grace(10, 5)
    with pytest.raises(ValueError, match="retention"):
        _topology(w, "count", EmitStrategy.ON_WINDOW_UPDATE, retention=14)
    _topology(w, "count", EmitStrategy.ON_WINDOW_UPDATE, retention=15)
    _topology(w, "count", EmitStrategy.ON_WINDOW_UPDATE, retention=timedelta(milliseconds=15))
    with TopologyTestDriver(_topology(w, "count", EmitStrategy.ON_WINDOW_UPDATE)) as d:
        d.input_topic("in").pipe("a", 1, 0)
        d.input_topic("in").pipe("b", 1, 15)  # store observed 15: end 0 < 15 - 15 is false: live
        assert d.session_store("agg").fetch_session("a", 0, 0) == 1
        d.input_topic("in").pipe("b", 1, 16)  # end 0 < 16 - 15: expired
        assert d.session_store("agg").fetch_session("a", 0, 0) is None


def test_timedelta_windows_equal_int_windows() -> None:
    a = SessionWindows.of_inactivity_gap_and_grace(timedelta(milliseconds=10), timedelta(milliseconds=5))
    b = SessionWindows.of_inactivity_gap_and_grace(10, 5)
    data = [("k", "a", 0), ("k", "b", 10), ("k", "c", 40), ("k", "d", 24), ("k", "e", 21)]
    assert _run(a, "aggregate", EmitStrategy.ON_WINDOW_UPDATE, data) == \
        _run(b, "aggregate", EmitStrategy.ON_WINDOW_UPDATE, data)


def test_on_window_close_with_in_memory_store_and_default_retention() -> None:
    """[deliberate]: emit-on-close works with the default retention, even when the next record moves
    stream time far past the closed session's retention."""
    w = SessionWindows.of_inactivity_gap_with_no_grace(10)
    got = _run(w, "count", EmitStrategy.ON_WINDOW_CLOSE, [("a", 0, 0), ("a", 0, 5), ("b", 0, 1_000_000)])
    assert got == [(("a", 0, 5), 2, 5)]


def test_on_window_close_order_by_end_then_key() -> None:
    w = SessionWindows.of_inactivity_gap_and_grace(5, 2)
    got = _run(w, "count", EmitStrategy.ON_WINDOW_CLOSE,
               [("b", 0, 10), ("a", 0, 10), ("c", 0, 3), ("z", 0, 100)])
    assert got == [(("c", 3, 3), 1, 3), (("a", 10, 10), 1, 10), (("b", 10, 10), 1, 10)]


def test_last_emitted_close_survives_restart() -> None:
    """``last_emitted_close`` is task state: after restoring from the changelogs, sessions closed
    and emitted before the restart are not emitted again."""
    topo = _topology(SessionWindows.of_inactivity_gap_with_no_grace(500), "count", EmitStrategy.ON_WINDOW_CLOSE)
    with TopologyTestDriver(topo) as d:
        for k, v, ts in VECTOR:
            d.input_topic("in").pipe(k, v, ts)
        assert recs(d.output_topic("out").read_records()) == [(("1", 10, 15), 2, 15)]
        logs = d.changelogs()
    with TopologyTestDriver(topo, changelogs=logs) as d2:
        d2.input_topic("in").pipe("1", "x", 1200)  # close time 700
        # by end, then start, then key: [599,600] before [600,600]
        assert recs(d2.output_topic("out").read_records()) == [(("2", 599, 600), 2, 600), (("1", 600, 600), 1, 600)]


# -- property test against the model -------------------------------------------------------------

EPOCH_2023 = 1_700_000_000_000
RECORDS = seqs(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["p", "q", "r", "s"]), st.integers(0, 120)),
               40, 120)


@given(st.integers(1, 25), st.integers(0, 25), st.sampled_from(["count", "reduce", "aggregate"]),
       st.booleans(), st.none() | st.integers(0, 30), RECORDS, st.sampled_from([0, EPOCH_2023]))
def test_session_aggregation_matches_model(gap: int, grace: int, op: str, on_close: bool,
                                           extra_retention: int | None, records: list[tuple], base: int) -> None:
    """``base``: the same inputs at realistic epoch-millisecond timestamps."""
    records = [(k, v, base + ts) for k, v, ts in records]
    retention = None if extra_retention is None else gap + grace + extra_retention
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    windows = SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    model = _model(gap, grace, op, on_close, retention)
    with TopologyTestDriver(_topology(windows, op, emit, retention)) as d:
        t = d.input_topic("in")
        out = d.output_topic("out")
        for rec in records:
            t.pipe(*rec)
            assert recs(out.read_records()) == model.process(*rec), rec
        assert d.metrics.get("dropped_records", 0) == model.dropped
        live = [((k, s, e), a) for k, s, e, a in model.store.live()]
        assert kvs(d.session_store("agg").all()) == live


def test_count_counts_records_with_none_values() -> None:
    """Only the key must be non-None (§2.2 "for each record with a non-None key")."""
    got = _run(SessionWindows.of_inactivity_gap_with_no_grace(10), "count", EmitStrategy.ON_WINDOW_UPDATE,
               [("k", None, 1), ("k", None, 2)])
    assert got == [(("k", 1, 1), 1, 1), (("k", 1, 1), None, 1), (("k", 1, 2), 2, 2)]


def test_dsl_argument_names_and_errors() -> None:
    b = StreamsBuilder()
    windowed = b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap=10, grace=5))
    windowed.aggregate(initializer=lambda: 0, aggregator=lambda k, v, a: a + 1, merger=lambda k, a, c: a + c,
                       name="a1", emit=EmitStrategy.ON_WINDOW_CLOSE)
    windowed.reduce(reducer=lambda a, v: a, name="r1")
    windowed.count(name="c1", emit=EmitStrategy.ON_WINDOW_UPDATE)
    for kwargs, needle in [
        ({"initializer": 0, "aggregator": lambda k, v, a: a, "merger": lambda k, a, c: a}, "initializer"),
        ({"initializer": lambda: 0, "aggregator": None, "merger": lambda k, a, c: a}, "aggregator"),
        ({"initializer": lambda: 0, "aggregator": lambda k, v, a: a, "merger": "m"}, "merger"),
    ]:
        with pytest.raises((TypeError, ValueError), match=needle):
            windowed.aggregate(**kwargs)  # type: ignore[arg-type]
    with pytest.raises((TypeError, ValueError), match="reducer"):
        windowed.reduce(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="emit"):
        windowed.count(emit="on_window_close")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="gap"):
        SessionWindows.of_inactivity_gap_and_grace("10", 5)  # type: ignore[arg-type]


@given(st.integers(1, 20), st.integers(0, 20), st.booleans(), RECORDS)
def test_rekeyed_session_aggregation_matches_model(gap: int, grace: int, on_close: bool, records: list[tuple]) -> None:
    """After ``group_by(selector)`` (a repartition) the same rules apply to the new key."""
    emit = EmitStrategy.ON_WINDOW_CLOSE if on_close else EmitStrategy.ON_WINDOW_UPDATE
    b = StreamsBuilder()
    (b.stream("in").group_by(lambda k, v: v + k[0])
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(gap, grace))
     .aggregate(lambda: "", lambda k, v, agg: agg + v, lambda k, x, y: x + y, name="agg", emit=emit)
     .to_stream().to("out"))
    model = _model(gap, grace, "aggregate", on_close)
    with TopologyTestDriver(b.build()) as d:
        for k, v, ts in records:
            d.input_topic("in").pipe(k, v, ts)
            assert recs(d.output_topic("out").read_records()) == model.process(v + k[0], v, ts)


def test_on_close_emits_only_from_last_emitted_close_so_restart_changes_nothing() -> None:
    """``last_emitted_close`` starts at -1: a session ending before it (negative event time) is never
    forwarded, by the running task nor after a restart from the changelogs (§2.2)."""
    def build() -> Any:
        b = StreamsBuilder()
        (b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(9, 13))
         .count(name="c", emit=EmitStrategy.ON_WINDOW_CLOSE).to_stream().to("out"))
        return b.build()

    inputs = [("a", 12), ("c", -3), ("a", 51)]
    with TopologyTestDriver(build()) as whole:
        for key, ts in inputs:
            whole.input_topic("in").pipe(key, 1, ts)
        expected = [(r.key, r.value, r.timestamp) for r in whole.output_topic("out").read_records()]
    assert expected == [(("a", 12, 12), 1, 12)]
    with TopologyTestDriver(build()) as first:
        for key, ts in inputs[:2]:
            first.input_topic("in").pipe(key, 1, ts)
        got = [(r.key, r.value, r.timestamp) for r in first.output_topic("out").read_records()]
        logs = first.changelogs()
    with TopologyTestDriver(build(), changelogs=logs) as second:
        second.input_topic("in").pipe("a", 1, 51)
        got += [(r.key, r.value, r.timestamp) for r in second.output_topic("out").read_records()]
    assert got == expected
