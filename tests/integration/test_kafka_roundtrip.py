"""Round trips through a real Kafka broker: what aiokafka writes is what a consumer group reads.

These run against the broker of the ``kafka_bootstrap`` fixture (the local Kafka 4.x started by
``scripts/kafka``, or ``$KAFKA_BOOTSTRAP_SERVERS``) and the local 3-broker cluster.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict

import pytest

from tests.support.kafka import (
    Out,
    consume_all,
    end_offsets,
    kafka_admin,
    produce,
    topic_partitions,
    unique_name,
    wait_for_topic,
)

N_RECORDS = 10_000
BASE_TS = 1_700_000_000_000


def _sample_records(n: int, seed: int) -> list[Out]:
    """Keyed records with distinct timestamps, varied values (incl. empty and null) and headers."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = f"user-{rng.randrange(257)}".encode()
        if i % 500 == 7:
            value: bytes | None = None  # tombstones travel too
        elif i % 333 == 5:
            value = b""
        else:
            value = f'{{"seq": {i}, "pad": "{"x" * rng.randrange(64)}"}}'.encode()
        headers = [("seq", str(i).encode()), ("bin", bytes([i % 256, 0, 255]))]
        if i % 3 == 0:
            headers.append(("empty", b""))
        out.append(Out(key, value, BASE_TS + 3 * i + rng.randrange(3), headers))
    return out


@pytest.mark.kafka
async def test_10k_keyed_records_arrive_exactly_once_intact_in_partition_order(
    kafka_bootstrap: str, topic_factory
) -> None:
    topic = await topic_factory(partitions=3, prefix="roundtrip")
    sent = _sample_records(N_RECORDS, seed=2)

    metas = await produce(kafka_bootstrap, topic, sent, acks="all")
    assert len(metas) == N_RECORDS
    assert {m.partition for m in metas} == {0, 1, 2}, "10k records over 257 keys must use all 3 partitions"

    group = unique_name("roundtrip-group")
    received = await consume_all(kafka_bootstrap, topic, group_id=group, expected=N_RECORDS, timeout=180)

    # The broker holds exactly what was sent, and the group received each record once.
    assert sum((await end_offsets(kafka_bootstrap, topic)).values()) == N_RECORDS
    seqs = [int(dict(r.headers)["seq"]) for r in received]
    assert len(received) == N_RECORDS
    assert sorted(seqs) == list(range(N_RECORDS))

    key_partition: dict[bytes, int] = {}
    for r in received:
        i = int(dict(r.headers)["seq"])
        want = sent[i]
        assert (r.key, r.value, r.timestamp, list(r.headers)) == (
            want.key, want.value, want.timestamp_ms, list(want.headers),
        ), f"record seq {i} changed in transit"  # fmt: skip
        assert r.timestamp_type == 0, "CreateTime: the producer's timestamp is kept"
        assert (r.partition, r.offset) == (metas[i].partition, metas[i].offset)
        assert key_partition.setdefault(r.key, r.partition) == r.partition, f"key {r.key!r} on two partitions"

    # Per partition: offsets arrive in order, contiguous from 0, and in the producer's send order.
    by_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for r in received:
        by_partition[r.partition].append((r.offset, int(dict(r.headers)["seq"])))
    for partition, rows in by_partition.items():
        offsets = [o for o, _ in rows]
        assert offsets == list(range(len(rows))), f"partition {partition} offsets out of order or gapped"
        partition_seqs = [s for _, s in rows]
        assert partition_seqs == sorted(partition_seqs), f"partition {partition} not in send order"

    # The consumer group committed the end of every partition.
    async with kafka_admin(kafka_bootstrap) as admin:
        committed = await admin.list_consumer_group_offsets(group)
    assert {tp.partition: om.offset for tp, om in committed.items() if tp.topic == topic} == {
        p: len(rows) for p, rows in by_partition.items()
    }


async def _wait_leader_moves(bootstrap: str, topic: str, partition: int, away_from: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    meta: dict = {}
    while True:
        try:
            meta = await topic_partitions(bootstrap, topic)
        except Exception as e:  # noqa: BLE001 - the admin may pick the killed node; ask again
            meta = {"error": repr(e)}
        leader = meta.get(partition, {}).get("leader", -1)
        if leader not in (-1, away_from):
            return leader
        if time.monotonic() > deadline:
            raise TimeoutError(f"leader of {topic}-{partition} still {leader} after {timeout} s: {meta}")
        await asyncio.sleep(0.2)


@pytest.mark.kafka
@pytest.mark.cluster
async def test_cluster_keeps_acks_all_writes_through_a_killed_broker(kafka_cluster, cluster_topic_factory) -> None:
    bootstrap = kafka_cluster.bootstrap
    topic = await cluster_topic_factory(partitions=2, replication_factor=3, configs={"min.insync.replicas": 2})
    meta = await topic_partitions(bootstrap, topic)
    assert all(sorted(m["replicas"]) == [1, 2, 3] for m in meta.values())

    before = [Out(f"k{i % 10}".encode(), f"before-{i}".encode()) for i in range(300)]
    await produce(bootstrap, topic, before, acks="all")

    leader = meta[0]["leader"]
    victim = leader - 1  # node ids are 1..3, handle indexes 0..2
    kafka_cluster.kill(victim)
    assert not kafka_cluster.alive(victim)
    new_leader = await _wait_leader_moves(bootstrap, topic, 0, away_from=leader, timeout=45)
    assert new_leader != leader

    # Two in-sync replicas remain: acks=all with min.insync.replicas=2 still succeeds.
    after = [Out(f"k{i % 10}".encode(), f"after-{i}".encode()) for i in range(300)]
    await produce(bootstrap, topic, after, acks="all", request_timeout_ms=30_000)

    kafka_cluster.restart(victim)
    await wait_for_topic(bootstrap, topic, 2, min_isr_size=3, timeout=60)

    received = await consume_all(bootstrap, topic, group_id=unique_name("cluster-group"), timeout=60)
    values = sorted(r.value for r in received)
    assert values == sorted(r.value for r in before + after)
