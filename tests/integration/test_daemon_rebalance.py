"""Two instances share the partitions; a third joins mid-stream (a rebalance: commit on revoke,
restore on assignment). No input is lost, and whenever offsets are committed, every input below
them is already reflected in the (acknowledged, hence readable) output."""

from __future__ import annotations

import asyncio
import json
import os
import random
from typing import Any

import pytest

from streamproc.dsl import EmitStrategy
from tests.support.daemon import (
    committed_offsets,
    read_to_end,
    recent_base_ts,
    running_app,
    unreflected,
    wait_until,
)
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

RECORDS = int(os.environ.get("STREAMPROC_DAEMON_REBALANCE_RECORDS", "60000"))
PARTITIONS = 8
CHUNKS = 6


async def check_commits_covered(bootstrap: str, group: str, source: str, sink: str,
                                by_partition: dict[int, list[tuple[int, str, int]]]) -> int:
    """Committed offsets first, output second: every input below a committed offset must be covered."""
    committed = await committed_offsets(bootstrap, group, source, PARTITIONS)
    outputs = await read_to_end(bootstrap, sink)
    below = [(u, ts) for p, recs in by_partition.items() for off, u, ts in recs if off < committed[p]]
    missing = unreflected(below, outputs)
    assert not missing, f"committed {committed} past un-reflected inputs, e.g. {missing[:5]}"
    return len(below)


async def test_third_instance_joins_mid_stream(kafka_bootstrap: str, topic_factory: Any) -> None:
    from topologies import sessions

    source = await topic_factory(PARTITIONS, prefix="clicks")
    sink = unique_name("sessions-out")
    rng = random.Random(3)
    users = [f"u{i:03d}" for i in range(300)]
    # event time increases (stream time is per partition): nothing is late, every click is reflected
    # in the session update it causes
    base = recent_base_ts(RECORDS * 1_000)
    data = [(rng.choice(users), base + i * 1_000) for i in range(RECORDS)]
    group = unique_name("rebalance")

    def app(name: str) -> Any:
        return running_app(sessions.build(emit=EmitStrategy.ON_WINDOW_UPDATE, input=source, output=sink),
                           kafka_bootstrap, group, commit_interval_ms=100)

    by_partition: dict[int, list[tuple[int, str, int]]] = {p: [] for p in range(PARTITIONS)}
    chunk = RECORDS // CHUNKS

    async def produce_chunk(k: int) -> None:
        part = data[k * chunk:(k + 1) * chunk]
        meta = await produce(kafka_bootstrap, source,
                             [Out(u.encode(), json.dumps({"page": "/"}).encode(), ts) for u, ts in part])
        for (u, ts), m in zip(part, meta):
            by_partition[m.partition].append((m.offset, u, ts))

    async with app("a") as a, app("b") as b:
        await wait_until(lambda: len(a.tasks) + len(b.tasks) == PARTITIONS and len(a.tasks) > 0
                         and len(b.tasks) > 0, 60, "two members sharing the 8 tasks")
        for k in range(3):
            await produce_chunk(k)
        await wait_until(lambda: sum(len(x.committer.committed) for x in (a, b)) > 0, 60, "first commits")
        await check_commits_covered(kafka_bootstrap, group, source, sink, by_partition)
        async with app("c") as c:
            async def produce_rest_in_order() -> None:  # in order: event time must not go backwards
                for k in range(3, CHUNKS):
                    await produce_chunk(k)

            produce_rest = asyncio.ensure_future(produce_rest_in_order())
            await wait_until(lambda: len(c.tasks.running()) > 0, 90, "the third member to run tasks")
            await check_commits_covered(kafka_bootstrap, group, source, sink, by_partition)
            await produce_rest
            total = sum(len(v) for v in by_partition.values())

            async def all_committed() -> bool:
                offs = await committed_offsets(kafka_bootstrap, group, source, PARTITIONS)
                return all(offs[p] == (max(o for o, _, _ in recs) + 1 if recs else -1)
                           for p, recs in by_partition.items())

            for _ in range(600):
                if await all_committed():
                    break
                await asyncio.sleep(0.2)
            assert await check_commits_covered(kafka_bootstrap, group, source, sink, by_partition) == total
            members = (a, b, c)
            assert all(len(m.tasks) > 0 for m in members), [m.tasks.ids() for m in members]
            assert sum(len(m.tasks) for m in members) == PARTITIONS
            assert all(m.metrics.value("streamproc_dropped_records_total", reason="late") == 0 for m in members)
            assert c.metrics.value("streamproc_restored_records_total",
                                   topic=f"{group}-{sessions.STORE}-changelog") > 0
    outputs = await read_to_end(kafka_bootstrap, sink)
    assert unreflected(data, outputs) == []  # no input lost
