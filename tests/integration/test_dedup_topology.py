"""topologies/dedup.py (a user processor with a change-logged store and a stream-time purge) on the
real broker, 4 partitions: each output partition equals a TopologyTestDriver fed that partition's
input in production order (records arrive out of order, so the purge's timing matters)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from tests.support.daemon import (
    decode,
    expected_by_partition,
    read_topic,
    recent_base_ts,
    running_app,
)
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

PARTITIONS = 4
EVENTS = 4_000
WINDOW_MS = 500
PURGE_MS = 200


async def test_dedup_daemon_equals_driver_per_partition(kafka_bootstrap: str, topic_factory: Any) -> None:
    from topologies import dedup

    input_topic = await topic_factory(PARTITIONS, prefix="events")
    output_topic = unique_name("unique-events")

    def build() -> Any:
        return dedup.build(WINDOW_MS, PURGE_MS, input=input_topic, output=output_topic)

    rng = random.Random(7)
    base = recent_base_ts(EVENTS * 10)
    events = []
    for i in range(EVENTS):
        ts = base + i * 3 - rng.choice([0, 0, 0, 40, 400, 900])  # some records late, some beyond the window
        events.append((f"id-{rng.randrange(300)}", {"i": i}, ts))
    want = expected_by_partition(build, [(input_topic, k, v, ts) for k, v, ts in events], output_topic, PARTITIONS)
    n_out = sum(len(v) for v in want.values())
    assert EVENTS // 10 < n_out < EVENTS, "the input has duplicates and non-duplicates"

    await produce(kafka_bootstrap, input_topic,
                  [Out(k.encode(), dedup.serde.JSON.serialize(v), ts) for k, v, ts in events])
    async with running_app(build(), kafka_bootstrap, unique_name("dedup"), wait_tasks=PARTITIONS):
        got = await read_topic(kafka_bootstrap, output_topic, n_out, timeout=60, idle=1)
    by_partition: dict[int, list[Any]] = {p: [] for p in range(PARTITIONS)}
    for record in got:
        by_partition[record.partition].append(decode(record))
    assert by_partition == want
