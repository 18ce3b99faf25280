"""KTable operators through the TopologyTestDriver (docs/semantics.md, "KTable operators"):
filter/filter_not/map_values/to_stream, table-table joins, group_by with count/reduce/aggregate.

Random runs are checked against models written here: after every update the operator's output for
the updated key(s) equals the operator applied to the model tables; single cases pin the tombstone
and timestamp rules (checked against Kafka Streams by the conformance suite)."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from streamproc.dsl import SessionWindows, StreamsBuilder, Topology
from streamproc.errors import ProcessingError
from streamproc.testing import TopologyTestDriver

Out = list[tuple[Any, Any, int]]


def _records(d: TopologyTestDriver, topic: str = "out") -> Out:
    return [(r.key, r.value, r.timestamp) for r in d.output_topic(topic).read_records()]


def _passes(key: Any, value: Any) -> bool:
    return value.startswith("x")


# -- filter / filter_not / map_values / to_stream ----------------------------------------------------

def _filter_topology(op: str) -> Topology:
    b = StreamsBuilder()
    table = b.table("t")
    if op == "filter":
        table = table.filter(_passes)
    elif op == "filter_not":
        table = table.filter_not(_passes)
    else:
        table = table.map_values(str.upper)
    table.to_stream().to("out")
    return b.build()


@pytest.mark.parametrize("op", ["filter", "filter_not", "map_values"])
def test_every_update_is_forwarded_as_the_operator_of_the_new_row(op: str) -> None:
    rng = random.Random(op)
    d = TopologyTestDriver(_filter_topology(op))
    for i in range(300):
        key = None if rng.random() < 0.05 else rng.choice("abc")
        value = None if rng.random() < 0.2 else rng.choice(["x", "y"]) + str(i)
        d.input_topic("t").pipe(key, value, i)
        out = _records(d)
        if key is None:
            assert out == [], "a table update with a None key is dropped"
            continue
        if value is None:
            expected = None
        elif op == "map_values":
            expected = value.upper()
        else:
            expected = value if _passes(key, value) is (op == "filter") else None
        assert out == [(key, expected, i)]


def test_user_functions_never_see_a_deleted_row() -> None:
    seen: list[Any] = []
    b = StreamsBuilder()
    table = b.table("t")
    table.filter(lambda k, v: seen.append(v) or True).to_stream().to("out")
    table.map_values(lambda v: seen.append(v) or v).to_stream().to("out2")
    d = TopologyTestDriver(b.build())
    d.input_topic("t").pipe("a", "x", 1)
    d.input_topic("t").pipe("a", None, 2)
    d.input_topic("t").pipe("b", None, 3)
    assert seen == ["x", "x"]
    assert _records(d) == [("a", "x", 1), ("a", None, 2), ("b", None, 3)]
    assert _records(d, "out2") == [("a", "x", 1), ("a", None, 2), ("b", None, 3)]


def test_a_raising_predicate_names_the_operator_and_key() -> None:
    b = StreamsBuilder()
    b.table("t").filter(lambda k, v: 1 / 0, name="bad").to_stream().to("out")
    d = TopologyTestDriver(b.build())
    with pytest.raises(ProcessingError, match="'bad'.*ZeroDivisionError.*'a'"):
        d.input_topic("t").pipe("a", "x", 1)


# -- table-table joins -------------------------------------------------------------------------------

def _join_model(kind: str, left: dict[Any, tuple[Any, int]], right: dict[Any, tuple[Any, int]],
                key: Any, ts: int, other: dict[Any, tuple[Any, int]]) -> tuple[Any, int] | None:
    """The joined row of ``key`` and its timestamp: the update's ``ts`` or the other side's row's, the later."""
    lv, rv = left.get(key), right.get(key)
    if (kind == "join" and (lv is None or rv is None)) or (kind == "left_join" and lv is None) or (lv is None and rv is None):
        return None
    return (None if lv is None else lv[0], None if rv is None else rv[0]), max(ts, other.get(key, (None, -1))[1])


@pytest.mark.parametrize("kind", ["join", "left_join", "outer_join"])
def test_a_join_result_is_the_join_of_both_tables_after_every_update(kind: str) -> None:
    b = StreamsBuilder()
    getattr(b.table("l"), kind)(b.table("r"), lambda a, c: (a, c), name="j").to_stream().to("out")
    d = TopologyTestDriver(b.build())
    rng = random.Random(kind)
    tables: dict[str, dict[Any, tuple[Any, int]]] = {"l": {}, "r": {}}
    for i in range(400):
        side, key = rng.choice("lr"), rng.choice("abcd")
        value = None if rng.random() < 0.25 else f"{side}{i}"
        ts = rng.randint(0, 100)
        other = tables["r" if side == "l" else "l"]
        before = _join_model(kind, tables["l"], tables["r"], key, ts, other)
        if value is None:
            tables[side].pop(key, None)
        else:
            tables[side][key] = (value, ts)
        after = _join_model(kind, tables["l"], tables["r"], key, ts, other)
        d.input_topic(side).pipe(key, value, ts)
        out = [(k, None if v is None else tuple(v), t) for k, v, t in _records(d)]
        if after is not None:
            assert out == [(key, after[0], after[1])]
        elif before is None and out:
            # Kafka Streams forwards a tombstone when this side changed while the other side has a row
            # (inner join; right side of a left join): never a value
            assert out == [(key, None, out[0][2])]
        elif before is not None:
            assert [(k, v) for k, v, _ in out] == [(key, None)], "a row that left the join is deleted"


def test_join_tombstones_and_timestamps_as_kafka_streams() -> None:
    b = StreamsBuilder()
    left, right = b.table("l"), b.table("r")
    joiner = lambda a, c: f"{a}+{c}"
    left.join(right, joiner).to_stream().to("inner")
    left.left_join(right, joiner).to_stream().to("left")
    left.outer_join(right, joiner).to_stream().to("outer")
    d = TopologyTestDriver(b.build())

    def pipe(topic: str, key: Any, value: Any, ts: int) -> dict[str, Out]:
        d.input_topic(topic).pipe(key, value, ts)
        return {t: _records(d, t) for t in ("inner", "left", "outer")}

    assert pipe("l", "a", "A", 10) == {"inner": [], "left": [("a", "A+None", 10)], "outer": [("a", "A+None", 10)]}
    # the result's timestamp is the later of the two rows'
    assert pipe("r", "a", "R", 5) == {"inner": [("a", "A+R", 10)], "left": [("a", "A+R", 10)],
                                      "outer": [("a", "A+R", 10)]}
    # the right row leaves: the inner row is deleted, the left and outer rows lose their right value
    assert pipe("r", "a", None, 20) == {"inner": [("a", None, 20)], "left": [("a", "A+None", 20)],
                                        "outer": [("a", "A+None", 20)]}
    # both sides empty, a tombstone of an absent key: outer joins forward nothing
    assert pipe("l", "b", None, 7) == {"inner": [], "left": [], "outer": []}
    assert pipe("r", "c", "C", 8) == {"inner": [], "left": [], "outer": [("c", "None+C", 8)]}
    assert pipe("l", "a", None, 9) == {"inner": [], "left": [("a", None, 9)], "outer": [("a", None, 9)]}
    assert pipe("l", None, "N", 9) == {"inner": [], "left": [], "outer": []}


def test_a_filtered_left_side_that_stays_out_forwards_nothing_in_a_left_join() -> None:
    """The left side of a left join sends old values: a filter whose row was and stays out drops the
    update (Kafka Streams' KTableFilter with sendOldValues), for every consumer of that filter; an
    inner join alone does not ask for old values, and its filter forwards the tombstone."""
    b = StreamsBuilder()
    left = b.table("l").filter(_passes)
    right = b.table("r")
    left.left_join(right, lambda a, c: f"{a}+{c}").to_stream().to("left")
    left.join(right, lambda a, c: f"{a}+{c}").to_stream().to("inner")
    d = TopologyTestDriver(b.build())
    d.input_topic("r").pipe("a", "R", 1)
    d.input_topic("l").pipe("a", "y1", 2)
    assert _records(d, "left") == []
    assert _records(d, "inner") == []
    inner_only = StreamsBuilder()
    inner_only.table("l").filter(_passes).join(inner_only.table("r"), lambda a, c: a).to_stream().to("inner")
    d_inner = TopologyTestDriver(inner_only.build())
    d_inner.input_topic("r").pipe("a", "R", 1)
    d_inner.input_topic("l").pipe("a", "y1", 2)
    assert _records(d_inner, "inner") == [("a", None, 2)]
    d.input_topic("l").pipe("a", "x1", 3)
    assert _records(d, "left") == [("a", "x1+R", 3)]
    d.input_topic("l").pipe("a", "y2", 4)
    assert _records(d, "left") == [("a", None, 4)]


def test_a_join_of_joins_and_a_restart_from_the_changelogs() -> None:
    def topo() -> Topology:
        b = StreamsBuilder()
        ab = b.table("a").join(b.table("b"), lambda x, y: x + y)
        ab.left_join(b.table("c"), lambda xy, z: xy + (z or "-")).to_stream().to("out")
        return b.build()

    d = TopologyTestDriver(topo())
    d.input_topic("a").pipe("k", "1", 1)
    d.input_topic("b").pipe("k", "2", 2)
    assert _records(d) == [("k", "12-", 2)]
    d2 = TopologyTestDriver(topo(), changelogs=d.changelogs())
    d2.input_topic("c").pipe("k", "3", 3)
    assert _records(d2) == [("k", "123", 3)]
    d2.input_topic("a").pipe("k", "4", 1)
    assert _records(d2) == [("k", "423", 3)]


def test_a_versioned_table_joins_with_its_newest_versions_only() -> None:
    b = StreamsBuilder()
    b.table("v", versioned=100).join(b.table("t"), lambda a, c: f"{a}+{c}").to_stream().to("out")
    d = TopologyTestDriver(b.build())
    d.input_topic("t").pipe("k", "T", 1)
    d.input_topic("v").pipe("k", "new", 10)
    d.input_topic("v").pipe("k", "older", 5)     # out of order: history only, not the table's value
    d.input_topic("t").pipe("k", "T2", 6)
    assert _records(d) == [("k", "new+T", 10), ("k", "new+T2", 10)]


def test_join_operand_errors_name_the_value_and_the_way_around() -> None:
    b = StreamsBuilder()
    table = b.table("t")
    with pytest.raises(ValueError, match="needs another KTable.*'not a table'"):
        table.join("not a table", lambda a, c: a)  # type: ignore[arg-type]
    sessions = b.stream("s").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0)).count()
    with pytest.raises(ValueError, match="windowed table.*to_stream"):
        table.join(sessions, lambda a, c: a)
    with pytest.raises(ValueError, match="windowed table.*to_stream"):
        sessions.filter(_passes)
    with pytest.raises(ValueError, match="joiner"):
        table.left_join(b.table("u"), "nope")  # type: ignore[arg-type]
    filtered = table.filter(_passes, name="only-x")
    with pytest.raises(ValueError, match="'only-x'.*to_stream\\(\\)\\.to\\(topic\\)"):
        b.stream("in").join(filtered, lambda v, c: v)


# -- group_by and the grouped table's aggregations ---------------------------------------------------

def _grouped_topology(agg: str) -> Topology:
    b = StreamsBuilder()
    grouped = b.table("t").group_by(lambda k, v: (v[0], int(v[1:])))
    if agg == "count":
        table = grouped.count(name="agg")
    elif agg == "reduce":
        table = grouped.reduce(lambda a, v: a + v, lambda a, v: a - v, name="agg")
    else:
        table = grouped.aggregate(lambda: 0, lambda k, v, a: a + v, lambda k, v, a: a - v, name="agg")
    table.to_stream().to("out")
    return b.build()


@pytest.mark.parametrize("agg", ["count", "reduce", "aggregate"])
def test_group_aggregates_follow_the_rows_as_they_move_between_groups(agg: str) -> None:
    rng = random.Random(agg)
    d = TopologyTestDriver(_grouped_topology(agg))
    rows: dict[str, str] = {}
    for i in range(300):
        key = rng.choice("abcdef")
        value = None if rng.random() < 0.2 else rng.choice("gh") + str(rng.randint(1, 9))
        d.input_topic("t").pipe(key, value, i)
        old = rows.pop(key, None)
        if value is not None:
            rows[key] = value
        out = _records(d)
        touched = {v[0] for v in (old, value) if v is not None}
        assert {k for k, _, _ in out} == touched
        for group, result, ts in out:
            members = [int(v[1:]) for v in rows.values() if v[0] == group]
            assert result == (len(members) if agg == "count" else sum(members)), (group, rows)
            assert ts == i


def test_a_move_subtracts_from_the_old_group_first_and_a_same_group_update_is_one_record() -> None:
    calls: list[tuple[str, Any, Any]] = []
    b = StreamsBuilder()
    (b.table("t").group_by(lambda k, v: (v[0], v))
     .aggregate(list, lambda k, v, a: (calls.append(("add", k, v)), a + [v])[1],
                lambda k, v, a: (calls.append(("sub", k, v)), [x for x in a if x != v])[1], name="agg")
     .to_stream().to("out"))
    d = TopologyTestDriver(b.build())
    d.input_topic("t").pipe("r1", "x1", 1)
    d.input_topic("t").pipe("r1", "x2", 2)      # same group: one change record
    d.input_topic("t").pipe("r1", "y1", 3)      # moves: subtract from x, then add to y
    d.input_topic("t").pipe("r1", None, 4)      # deleted: subtract only
    d.input_topic("t").pipe("r2", None, 5)      # deleting an absent row: nothing
    assert calls == [("add", "x", "x1"), ("sub", "x", "x1"), ("add", "x", "x2"), ("sub", "x", "x2"),
                     ("add", "y", "y1"), ("sub", "y", "y1")]
    assert _records(d) == [("x", ["x1"], 1), ("x", ["x2"], 2), ("x", [], 3), ("y", ["y1"], 3), ("y", [], 4)]


def test_a_selector_returning_a_none_key_or_value_leaves_the_row_out() -> None:
    b = StreamsBuilder()
    b.table("t").group_by(lambda k, v: (None if v == "skip" else v, v)).count(name="agg").to_stream().to("out")
    d = TopologyTestDriver(b.build())
    d.input_topic("t").pipe("a", "skip", 1)
    d.input_topic("t").pipe("a", "x", 2)
    d.input_topic("t").pipe("a", "skip", 3)
    assert _records(d) == [("x", 1, 2), ("x", 0, 3)]


def test_a_bad_selector_result_is_named() -> None:
    b = StreamsBuilder()
    b.table("t").group_by(lambda k, v: v, name="g").count().to_stream().to("out")
    d = TopologyTestDriver(b.build())
    with pytest.raises(ProcessingError, match="selector.*\\(new_key, new_value\\) pair.*'xyz'"):
        d.input_topic("t").pipe("a", "xyz", 1)


def test_group_by_of_a_filtered_and_joined_table_restarts_from_the_changelogs() -> None:
    def topo() -> Topology:
        b = StreamsBuilder()
        joined = b.table("l").filter(_passes).join(b.table("r"), lambda a, c: c)
        joined.group_by(lambda k, v: (v, k)).count(name="agg").to_stream().to("out")
        return b.build()

    rng = random.Random(7)
    inputs = [(rng.choice("lr"), rng.choice("abcde"), None if rng.random() < 0.2 else rng.choice(["x", "y", "g1", "g2"]), i)
              for i in range(200)]
    d = TopologyTestDriver(topo())
    for topic, key, value, ts in inputs[:120]:
        d.input_topic(topic).pipe(key, value, ts)
    d2 = TopologyTestDriver(topo(), changelogs=d.changelogs())
    last: dict[Any, Any] = {k: v for k, v, _ in _records(d)}
    for topic, key, value, ts in inputs[120:]:
        d2.input_topic(topic).pipe(key, value, ts)
    last.update({k: v for k, v, _ in _records(d2)})
    left: dict[str, str] = {}
    right: dict[str, str] = {}
    for topic, key, value, _ in inputs:
        side = left if topic == "l" else right
        if value is None:
            side.pop(key, None)
        else:
            side[key] = value
    expected = Counter(right[k] for k, v in left.items() if k in right and _passes(k, v))
    assert {g: n for g, n in last.items() if n} == dict(expected)


def test_describe_shows_the_table_operators_and_the_grouped_store() -> None:
    b = StreamsBuilder()
    table = b.table("t", name="rows")
    table.filter(_passes, name="xs").join(b.table("u", name="others"), lambda a, c: a, name="both")
    table.group_by(lambda k, v: (v, k), name="by-value").count(name="per-value")
    text = b.build().describe()
    for expected in ("xs (table-filter)", "both-join-this", "both-join-other", "both (table-join)",
                     "by-value-select (table-group-by)", "topic: by-value-repartition",
                     "per-value (table-count; stores: [per-value])"):
        assert expected in text, expected
    mermaid = b.build().describe(format="mermaid")
    assert "per-value<br/>table-count" in mermaid
    assert "both<br/>table-join" in mermaid


def test_the_example_of_the_docs() -> None:
    # docs/dsl.md, "KTable operators"
    from streamproc import serde

    b = StreamsBuilder()
    users = b.table("users", key_serde=serde.STRING, value_serde=serde.JSON)
    orders = b.table("orders", key_serde=serde.STRING, value_serde=serde.JSON)
    paying = users.filter(lambda user, u: u["plan"] != "free")
    regions = paying.map_values(lambda u: u["region"])
    spend = orders.left_join(regions, lambda o, region: {"amount": o["amount"], "region": region or "none"})
    per_region = (spend.group_by(lambda user, s: (s["region"], s["amount"]))
                  .aggregate(lambda: 0, lambda region, amount, total: total + amount,
                             lambda region, amount, total: total - amount, name="spend-per-region"))
    per_region.to_stream().to("spend-per-region", key_serde=serde.STRING, value_serde=serde.JSON)
    d = TopologyTestDriver(b.build())
    d.input_topic("orders").pipe("u1", {"amount": 5}, 1)
    d.input_topic("users").pipe("u1", {"region": "eu", "plan": "pro"}, 2)
    assert [(r.key, r.value) for r in d.output_topic("spend-per-region").read_records()] == [
        ("none", 5), ("none", 0), ("eu", 5)]
