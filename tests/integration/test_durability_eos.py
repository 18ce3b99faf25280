"""Exactly-once v2 on a real broker: the output read ``read_committed`` equals the
TopologyTestDriver's exactly (no duplicates, per partition in order), input offsets are committed
in the transactions, and a fenced producer makes the app abort, rebuild its tasks from the
changelogs and still produce exactly the driver's output."""

from __future__ import annotations

import asyncio
import json
import os
from collections import defaultdict
from functools import partial
from typing import Any

import pytest

from tests.support.daemon import (
    committed_offsets,
    decode,
    expected_by_partition,
    running_app,
    wait_until,
)
from tests.support.durability import read_all, recent_click_stream
from tests.support.kafka import Out, end_offsets, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

RECORDS = int(os.environ.get("STREAMPROC_EOS_TEST_RECORDS", "30000"))
PARTITIONS = 4


async def read_committed(bootstrap: str, topic: str) -> list[Any]:
    return await read_all(bootstrap, topic, isolation_level="read_committed")


async def setup(kafka_bootstrap: str, topic_factory: Any, n: int,
                first: int | None = None) -> tuple[Any, str, str, dict[int, list[Any]], Any]:
    """Topics, the expected output of ``n`` clicks, and the clicks produced (the first ``first`` of
    them when given; the returned coroutine function produces the rest)."""
    from topologies import sessions

    clicks = await topic_factory(PARTITIONS, prefix="clicks")
    output = unique_name("session-stats")
    build = partial(sessions.build, input=clicks, output=output)
    data = recent_click_stream(n)
    cut = n if first is None else first

    async def send(part: list[Any]) -> None:
        await produce(kafka_bootstrap, clicks, (Out(k.encode(), json.dumps(v).encode(), ts) for k, v, ts in part))

    await send(data[:cut])
    expected = expected_by_partition(build, ((clicks, k, v, ts) for k, v, ts in data), output, PARTITIONS)
    assert sum(len(v) for v in expected.values()) > n // 20  # many sessions close
    return build, clicks, output, expected, partial(send, data[cut:])


def diff(got: list[Any], want: list[Any]) -> str:
    """Which records are missing / extra (as multisets), for a readable failure."""
    from collections import Counter

    g = Counter(json.dumps(r, sort_keys=True) for r in got)
    w = Counter(json.dumps(r, sort_keys=True) for r in want)
    missing, extra = list((w - g).elements()), list((g - w).elements())
    return (f"{len(got)} records, expected {len(want)}: {len(missing)} missing, e.g. {missing[:3]}; "
            f"{len(extra)} unexpected, e.g. {extra[:3]}")


def by_partition(records: list[Any]) -> dict[int, list[Any]]:
    got: dict[int, list[Any]] = defaultdict(list)
    for r in records:
        got[r.partition].append(decode(r))
    return got


async def test_exactly_once_output_equals_driver(kafka_bootstrap: str, topic_factory: Any) -> None:
    build, clicks, output, expected, _ = await setup(kafka_bootstrap, topic_factory, RECORDS)
    app_id = unique_name("eos")
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=PARTITIONS,
                           processing_guarantee="exactly_once_v2") as app:
        assert app.eos is not None
        ends = await end_offsets(kafka_bootstrap, clicks)
        for _ in range(1200):
            if await committed_offsets(kafka_bootstrap, app_id, clicks, PARTITIONS) == ends:
                break
            await asyncio.sleep(0.1)
        assert app.eos.committed_transactions > 0 and app.eos.aborted_transactions == 0
    got = by_partition(await read_committed(kafka_bootstrap, output))
    for p in range(PARTITIONS):
        assert got[p] == expected[p], f"partition {p} differs: {diff(got[p], expected[p])}"
    assert await committed_offsets(kafka_bootstrap, app_id, clicks, PARTITIONS) == ends


async def test_fenced_producer_rebuilds_tasks_and_output_stays_exact(kafka_bootstrap: str,
                                                                     topic_factory: Any) -> None:
    """A second producer with the app's transactional id fences it mid-run: the app aborts, rebuilds
    every task from its changelog (read_committed) and goes on; no output is lost or duplicated."""
    from aiokafka import AIOKafkaProducer

    build, clicks, output, expected, send_rest = await setup(kafka_bootstrap, topic_factory, RECORDS,
                                                             first=RECORDS // 2)
    app_id = unique_name("eos-fence")
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=PARTITIONS,
                           processing_guarantee="exactly_once_v2", max_poll_records=500) as app:
        assert app.eos is not None
        await wait_until(lambda: app.eos is not None and app.eos.committed_transactions >= 1, 60, "a transaction")
        intruder = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=app.eos.transactional_id)
        await intruder.start()  # init_transactions: bumps the epoch, the app's producer is fenced
        await intruder.begin_transaction()  # returns once the intruder has its producer id and epoch
        await intruder.abort_transaction()
        await intruder.stop()
        await send_rest()  # the app notices the fence at its next transactional request
        await wait_until(lambda: app.eos is not None and app.eos.producer_restarts >= 1, 60, "the producer replaced")
        ends = await end_offsets(kafka_bootstrap, clicks)
        for _ in range(1200):
            if await committed_offsets(kafka_bootstrap, app_id, clicks, PARTITIONS) == ends:
                break
            await asyncio.sleep(0.1)
        assert app.eos.aborted_transactions >= 1
        failures = sum(s.value for m in app.metrics.registry.collect() for s in m.samples
                       if s.name == "streamproc_task_failures_total")
        assert failures >= PARTITIONS  # every task failed (dirty close) and was rebuilt
        assert app.metrics.value("streamproc_restored_records_total",
                                 topic=f"{app_id}-session-clicks-changelog") > 0
    got = by_partition(await read_committed(kafka_bootstrap, output))
    for p in range(PARTITIONS):
        assert got[p] == expected[p], f"partition {p} differs: {diff(got[p], expected[p])}"
