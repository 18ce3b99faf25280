"""The replay orders: the reference definitions, and the Spark plan that implements them."""

from __future__ import annotations

import random
from collections import namedtuple

import pytest

from streamproc.spark.ordering import event_time_order, offset_order

R = namedtuple("R", "topic partition offset timestamp")


def test_offset_order_single_topic_is_offset_order() -> None:
    recs = [R("a", 0, o, ts) for o, ts in enumerate([5, 1, 9, 3])]
    assert offset_order(list(reversed(recs))) == recs


def test_offset_order_merges_by_head_timestamp_keeping_each_partition_in_offset_order() -> None:
    a = [R("a", 0, 0, 10), R("a", 0, 1, 2), R("a", 0, 2, 20)]
    b = [R("b", 0, 0, 5), R("b", 0, 1, 15)]
    got = offset_order(a + b)
    assert [(r.topic, r.offset) for r in got] == [("b", 0), ("a", 0), ("a", 1), ("b", 1), ("a", 2)]


def test_offset_order_ties_go_to_the_smaller_topic_name() -> None:
    got = offset_order([R("z", 0, 0, 7), R("a", 0, 0, 7)])
    assert [r.topic for r in got] == ["a", "z"]


def test_event_time_order_puts_tables_first_at_equal_timestamps() -> None:
    recs = [R("payments", 0, 0, 10), R("rates", 0, 0, 10), R("payments", 0, 1, 5)]
    got = event_time_order(recs, table_topics=["rates"])
    assert [(r.topic, r.timestamp) for r in got] == [("payments", 5), ("rates", 10), ("payments", 10)]


def _random_records(rng: random.Random, topics: list[str], partitions: int) -> list[R]:
    out = []
    for t in topics:
        for p in range(partitions):
            for o in range(rng.randint(0, 40)):
                out.append(R(t, p, o, rng.randint(0, 30)))
    rng.shuffle(out)
    return out


@pytest.mark.parametrize("order", ["offset", "event-time"])
def test_spark_plan_sorts_each_task_partition_like_the_reference(spark, order: str) -> None:
    from streamproc.spark.job import _ordered

    rng = random.Random(7)
    topics = ["payments", "rates", "x"]
    recs = _random_records(rng, topics, partitions=5)
    df = spark.createDataFrame(recs, "topic string, partition int, offset long, timestamp long")
    ordered = _ordered(df, order, len(topics), ["rates"], 5)
    chunks = ordered.rdd.mapPartitions(
        lambda it: [[(r.topic, r.partition, r.offset, r.timestamp) for r in it]]).collect()
    seen_partitions: list[int] = []
    for chunk in chunks:
        rows = [R(*r) for r in chunk]
        parts = [r.partition for r in rows]
        assert parts == sorted(parts), "task partitions must be contiguous in a Spark partition"
        for p in sorted(set(parts)):
            mine = [r for r in rows if r.partition == p]
            ref = offset_order(mine) if order == "offset" else event_time_order(mine, ["rates"])
            assert mine == ref, f"partition {p}"
            seen_partitions.append(p)
    assert sorted(seen_partitions) == sorted({r.partition for r in recs})
    assert sum(len(c) for c in chunks) == len(recs)
