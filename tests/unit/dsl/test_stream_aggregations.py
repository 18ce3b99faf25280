"""Non-windowed stream aggregations: ``group_by_key()/group_by()`` then ``count``/``reduce``/
``aggregate``, through the TopologyTestDriver, against a fold written here (docs/semantics.md,
"Tables and their aggregations")."""

from __future__ import annotations

import random
from typing import Any

import pytest

from streamproc.dsl import Materialized, StreamsBuilder, Topology
from streamproc.errors import ProcessingError
from streamproc.testing import TopologyTestDriver
from tests.support.dsl import ADAPTERS
from topologies import wordcount

Inputs = list[tuple[Any, Any, int]]


def _regroup(key: Any, value: Any) -> Any:
    return None if value is None else value[0]


def _topology(kind: str, regroup: bool, name: str = "agg") -> Topology:
    b = StreamsBuilder()
    stream = b.stream("in")
    grouped = stream.group_by(_regroup) if regroup else stream.group_by_key()
    if kind == "count":
        table = grouped.count(name=name)
    elif kind == "reduce":
        table = grouped.reduce(lambda agg, v: agg + "|" + v, name=name)
    else:
        table = grouped.aggregate(list, lambda k, v, agg: agg + [(k, v)], name=name)
    table.to_stream().to("out")
    return b.build()


def _fold(kind: str, regroup: bool, inputs: Inputs) -> list[tuple[Any, Any, int]]:
    """What Kafka Streams forwards: per record with a key and a value, ``(key, new aggregate,
    max(ts, the key's previous timestamp))``."""
    state: dict[Any, tuple[Any, int]] = {}
    out = []
    for key, value, ts in inputs:
        if regroup:
            key = _regroup(key, value)
        if key is None or value is None:
            continue
        old = state.get(key)
        if kind == "count":
            agg = 1 if old is None else old[0] + 1
        elif kind == "reduce":
            agg = value if old is None else old[0] + "|" + value
        else:
            agg = ([] if old is None else old[0]) + [(key, value)]
        ts = ts if old is None else max(ts, old[1])
        state[key] = (agg, ts)
        out.append((key, agg, ts))
    return out


def _inputs(rng: random.Random, n: int) -> Inputs:
    return [(None if rng.random() < 0.1 else rng.choice("abc"),
             None if rng.random() < 0.1 else rng.choice(["x1", "x2", "y1", "z9"]),
             rng.randint(0, 50)) for _ in range(n)]


def _run(topo: Topology, inputs: Inputs, **kw: Any) -> tuple[list[tuple[Any, Any, int]], TopologyTestDriver]:
    d = TopologyTestDriver(topo, **kw)
    for key, value, ts in inputs:
        d.input_topic("in").pipe(key, value, ts)
    out = [(r.key, _listed(r.value), r.timestamp) for r in d.output_topic("out").read_records()]
    return out, d


def _listed(value: Any) -> Any:
    """A list aggregate read back from JSON has lists for tuples."""
    return [tuple(x) for x in value] if isinstance(value, list) else value


@pytest.mark.parametrize("regroup", [False, True], ids=["group_by_key", "group_by"])
@pytest.mark.parametrize("kind", ADAPTERS)
def test_updates_follow_the_fold(kind: str, regroup: bool) -> None:
    rng = random.Random(f"{kind}-{regroup}")
    for _ in range(20):
        inputs = _inputs(rng, rng.randint(1, 40))
        out, d = _run(_topology(kind, regroup), inputs)
        d.close()
        assert out == _fold(kind, regroup, inputs)


@pytest.mark.parametrize("kind", ADAPTERS)
def test_null_keys_and_values_are_dropped_and_counted_under_the_operator(kind: str) -> None:
    inputs = [("a", "x1", 1), (None, "x2", 2), ("a", None, 3), (None, None, 4), ("a", "y1", 5)]
    out, d = _run(_topology(kind, regroup=False), inputs)
    with d:
        assert [k for k, _, _ in out] == ["a", "a"]
        m = d.metrics_by_operator()["agg"]
        assert (m["dropped_records_null_key"], m["dropped_records_null_value"]) == (2, 1)


def test_group_by_drops_null_new_keys_before_the_repartition_topic() -> None:
    # _regroup gives None for a None value: the repartition sink drops it, the count never sees it
    out, d = _run(_topology("count", regroup=True), [("a", "x1", 1), ("b", None, 2), ("c", "x2", 3)])
    with d:
        assert out == [("x", 1, 1), ("x", 2, 3)]
        assert d.metrics_by_operator()["agg"]["dropped_records_null_value"] == 0


@pytest.mark.parametrize("regroup", [False, True], ids=["group_by_key", "group_by"])
@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_restarted_driver_continues_from_the_changelog(kind: str, regroup: bool) -> None:
    rng = random.Random(f"restore-{kind}-{regroup}")
    inputs = _inputs(rng, 60)
    topo = _topology(kind, regroup)
    whole, d = _run(topo, inputs)
    d.close()
    first, d1 = _run(topo, inputs[:30])
    changelogs = d1.changelogs()
    d1.close()
    assert changelogs["agg"], "the aggregation wrote no changelog"
    second, d2 = _run(topo, inputs[30:], changelogs=changelogs)
    d2.close()
    assert first + second == whole
    # a driver without the changelog starts over (so the restore is what made them equal)
    fresh, d3 = _run(topo, inputs[30:])
    d3.close()
    assert fresh == _fold(kind, regroup, inputs[30:])


def test_describe_shows_the_operator_its_store_and_the_repartition_topic() -> None:
    text = _topology("count", regroup=True, name="counts").describe()
    assert "Processor: counts (stream-count; stores: [counts])" in text
    assert "counts (key_value, changelog: <application_id>-counts-changelog)" in text
    assert "Sink: counts-repartition-sink (topic: counts-repartition)" in text
    mermaid = _topology("count", regroup=False, name="counts").describe(format="mermaid")
    assert 'n_counts["counts<br/>stream-count"]' in mermaid
    assert 's_counts[("counts<br/>key_value store")]' in mermaid


def test_an_aggregator_that_raises_leaves_the_aggregate_unchanged() -> None:
    b = StreamsBuilder()
    b.stream("in").group_by_key().aggregate(lambda: 0, lambda k, v, agg: agg + 10 // v, name="agg") \
        .to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        d.input_topic("in").pipe("a", 5, 1)
        with pytest.raises(ProcessingError, match="aggregation function of operator 'agg'.*ZeroDivisionError"):
            d.input_topic("in").pipe("a", 0, 2)
        d.input_topic("in").pipe("a", 1, 3)
        assert [r.value for r in d.output_topic("out").read_records()] == [2, 12]


def test_an_aggregate_of_none_deletes_the_key() -> None:
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .reduce(lambda agg, v: None if v == "reset" else agg + v, name="agg").to_stream().to("out"))
    with TopologyTestDriver(b.build()) as d:
        for value, ts in [("a", 1), ("reset", 2), ("b", 3)]:
            d.input_topic("in").pipe("k", value, ts)
        # after the delete, "b" starts a new aggregate (with its own timestamp)
        assert [(r.value, r.timestamp) for r in d.output_topic("out").read_records()] == \
            [("a", 1), (None, 2), ("b", 3)]


def test_bad_options_name_the_value() -> None:
    grouped = StreamsBuilder().stream("in").group_by_key()
    with pytest.raises(ValueError, match="retention.*60000"):
        grouped.count(materialized=Materialized(retention=60_000))
    with pytest.raises(ValueError, match="reducer"):
        grouped.reduce("not callable")  # type: ignore[arg-type]


def test_a_stream_joins_an_aggregated_table_as_it_is_at_each_record() -> None:
    b = StreamsBuilder()
    counts = b.stream("in").group_by_key().count(name="counts")
    b.stream("other").join(counts, lambda v, c: (v, c)).to("joined")
    d = TopologyTestDriver(b.build())
    d.input_topic("in").pipe("a", "x", 1)
    d.input_topic("other").pipe("a", "o1", 2)
    d.input_topic("in").pipe("a", "y", 3)
    d.input_topic("other").pipe("a", "o2", 4)
    d.input_topic("other").pipe("b", "o3", 5)
    assert [(r.key, tuple(r.value), r.timestamp) for r in d.output_topic("joined").read_records()] == [
        ("a", ("o1", 1), 2), ("a", ("o2", 2), 4)]


def test_wordcount_counts_lowercase_words() -> None:
    sentences = [("s1", "The cat and THE hat", 10), (None, "a cat, a hat!", 5), ("s3", None, 20),
                 ("s4", "Don't stop", 30)]
    with TopologyTestDriver(wordcount.build()) as d:
        for key, value, ts in sentences:
            d.input_topic(wordcount.INPUT).pipe(key, value, ts)
        final = {r.key: (r.value, r.timestamp) for r in d.output_topic(wordcount.OUTPUT).read_records()}
    expected: dict[str, tuple[int, int]] = {}
    for _, value, ts in sentences:
        for word in wordcount.words(value):
            n, t = expected.get(word, (0, ts))
            expected[word] = (n + 1, max(t, ts))
    assert final == expected
    assert final["the"] == (2, 10) and final["a"] == (2, 5) and final["hat"] == (2, 10)
    assert "don't" in final



def test_the_examples_of_the_docs() -> None:
    # docs/semantics.md, "Tables and their aggregations"
    out, d = _run(_topology("count", regroup=False), [("a", "x", 5), (None, "x", 6), ("a", None, 7), ("a", "y", 3),
                                                     ("b", "z", 4)])
    with d:
        assert out == [("a", 1, 5), ("a", 2, 5), ("b", 1, 4)]
        m = d.metrics_by_operator()["agg"]
        assert (m["dropped_records_null_key"], m["dropped_records_null_value"]) == (1, 1)
    # docs/dsl.md, "Stream aggregations"
    with TopologyTestDriver(wordcount.build()) as d:
        d.input_topic(wordcount.INPUT).pipe(None, "the cat and the hat", 1)
        assert [(r.key, r.value) for r in d.output_topic(wordcount.OUTPUT).read_records()] == \
            [("the", 1), ("cat", 1), ("and", 1), ("the", 2), ("hat", 1)]
