"""The task input buffer: whatever order fetched batches arrive in, a task processes its records in
the merge order (smallest head timestamp first, ties to the topic that sorts first), as long as it
waits for every lagging partition; nothing is lost, duplicated or reordered within a partition."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc.runtime.partition_group import PartitionGroup
from streamproc.spark.ordering import offset_order


class TP(NamedTuple):
    topic: str
    partition: int


class Rec(NamedTuple):
    topic: str
    offset: int
    timestamp: int


def merge_order(streams: dict[TP, list[Rec]]) -> list[Rec]:
    """The reference: k-way merge of the full per-partition sequences by (head timestamp, topic)."""
    heads = [(recs[0].timestamp, tp.topic, tp.partition, 0) for tp, recs in streams.items() if recs]
    heapq.heapify(heads)
    out = []
    while heads:
        _, topic, partition, i = heapq.heappop(heads)
        recs = streams[TP(topic, partition)]
        out.append(recs[i])
        if i + 1 < len(recs):
            heapq.heappush(heads, (recs[i + 1].timestamp, topic, partition, i + 1))
    return out


topics = st.lists(st.sampled_from(["payments", "rates", "clicks", "views", "app-repartition"]),
                  min_size=1, max_size=4, unique=True)


@st.composite
def scenario(draw: Any) -> tuple[dict[TP, list[Rec]], list[tuple[int, int]]]:
    names = draw(topics)
    streams: dict[TP, list[Rec]] = {}
    for name in names:
        stamps = draw(st.lists(st.integers(0, 40), max_size=30))  # out of order within a partition too
        streams[TP(name, 3)] = [Rec(name, off, ts) for off, ts in enumerate(stamps)]
    # arrival: a sequence of (partition index, batch size) fetches, then everything left
    fetches = draw(st.lists(st.tuples(st.integers(0, len(names) - 1), st.integers(1, 8)), max_size=40))
    return streams, fetches


def run(streams: dict[TP, list[Rec]], fetches: Sequence[tuple[int, int]], bound: int = 1000,
        max_idle_ms: int = 10**9, lag_known: bool = True) -> tuple[list[Rec], PartitionGroup]:
    """Feed the fetches, interleaved with draining, telling the group which partitions lag."""
    tps = list(streams)
    group = PartitionGroup(tps, bound=bound, max_idle_ms=max_idle_ms)
    delivered = dict.fromkeys(tps, 0)
    out: list[Rec] = []

    def drain() -> None:
        while True:
            lagging = [tp for tp in tps if delivered[tp] < len(streams[tp])] if lag_known else []
            found = group.next_run(0, lagging)
            if found is None:
                return
            tp, records = found
            assert all(r.topic == tp.topic for r in records)
            out.extend(records)

    def fetch(tp: TP, size: int) -> None:
        if group.full(tp):  # paused: the consumer does not fetch it
            return
        batch = streams[tp][delivered[tp]:delivered[tp] + size]
        delivered[tp] += len(batch)
        group.add(tp, batch)

    for index, size in fetches:
        fetch(tps[index], size)
        drain()
    while any(delivered[tp] < len(streams[tp]) for tp in tps):  # then the rest, fetching what is not paused
        for tp in tps:
            fetch(tp, 3)
        drain()
    drain()
    return out, group


@given(scenario())
def test_processing_order_is_the_merge_order_whatever_the_arrival(case: Any) -> None:
    streams, fetches = case
    out, group = run(streams, fetches)
    assert out == merge_order(streams)
    assert len(group) == 0 and group.enforced_runs == 0


@given(scenario(), st.integers(1, 5))
def test_a_small_bound_pauses_but_changes_nothing(case: Any, bound: int) -> None:
    streams, fetches = case
    out, _ = run(streams, fetches, bound=bound)
    assert out == merge_order(streams)


@given(scenario())
def test_the_reference_is_the_spark_offset_order(case: Any) -> None:
    """The daemon's merge and `streamproc reprocess --order offset` are one rule."""
    streams, _ = case
    records = [r for recs in streams.values() for r in recs]
    assert merge_order(streams) == offset_order(records)


@given(scenario())
def test_without_waiting_every_record_is_released_once_in_partition_order(case: Any) -> None:
    streams, fetches = case
    out, _ = run(streams, fetches, max_idle_ms=0, lag_known=True)
    assert sorted(out) == sorted(r for recs in streams.values() for r in recs)
    for tp, recs in streams.items():
        assert [r for r in out if r.topic == tp.topic] == recs


def test_a_lagging_empty_partition_blocks_until_the_idle_bound_then_counts_enforced_runs() -> None:
    a, b = TP("a", 0), TP("b", 0)
    group = PartitionGroup([a, b], max_idle_ms=500)
    group.add(a, [Rec("a", 0, 10), Rec("a", 1, 20)])
    assert group.next_run(1_000, lagging=[b]) is None
    assert group.waiting_since() == 1_000
    assert group.next_run(1_499, lagging=[b]) is None
    tp, records = group.next_run(1_500, lagging=[b])  # type: ignore[misc]
    assert (tp, list(records)) == (a, [Rec("a", 0, 10), Rec("a", 1, 20)])
    assert group.enforced_runs == 1
    # once b has records the wait is over; b's older record goes first
    group.add(a, [Rec("a", 2, 30)])
    group.add(b, [Rec("b", 0, 25)])
    assert group.next_run(1_600, lagging=[]) == (b, [Rec("b", 0, 25)])
    assert group.waiting_since() is None


def test_a_partition_with_nothing_unread_never_blocks() -> None:
    a, b = TP("a", 0), TP("b", 0)
    group = PartitionGroup([a, b], max_idle_ms=10**9)
    group.add(a, [Rec("a", 0, 10)])
    assert group.next_run(0, lagging=[]) == (a, [Rec("a", 0, 10)])


def test_ties_go_to_the_topic_that_sorts_first_and_runs_stop_at_the_other_head() -> None:
    rates, payments = TP("rates", 1), TP("payments", 1)
    group = PartitionGroup([rates, payments])
    group.add(rates, [Rec("rates", 0, 5), Rec("rates", 1, 7), Rec("rates", 2, 9)])
    group.add(payments, [Rec("payments", 0, 7)])
    assert group.next_run(0) == (rates, [Rec("rates", 0, 5)])
    assert group.next_run(0) == (payments, [Rec("payments", 0, 7)])
    assert group.next_run(0) == (rates, [Rec("rates", 1, 7), Rec("rates", 2, 9)])


def test_full_and_clear() -> None:
    a, b = TP("a", 0), TP("b", 0)
    group = PartitionGroup([a, b], bound=3)
    group.add(a, [Rec("a", 5, 1), Rec("a", 6, 2)])
    assert not group.full(a)
    group.add(a, [Rec("a", 7, 3)])
    assert group.full(a) and group.buffered(a) == 3
    assert group.next_run(0) == (a, [Rec("a", 5, 1), Rec("a", 6, 2)])
    assert not group.full(a)
    assert group.clear() == {a: 7}
    assert len(group) == 0 and group.empty_partitions() == [a, b]


@pytest.mark.parametrize(("bound", "idle"), [(0, 0), (1, -1)])
def test_bad_arguments_are_named(bound: int, idle: int) -> None:
    with pytest.raises(ValueError, match="bound|max_idle_ms"):
        PartitionGroup([TP("a", 0)], bound=bound, max_idle_ms=idle)
