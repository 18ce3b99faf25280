"""KTable operators on the real broker (4 partitions): two co-partitioned tables joined
(``orders`` left-join ``customers``), the join regrouped by region with ``group_by`` and summed with
an adder and a subtractor. The daemon's final sum per region equals the TopologyTestDriver's.

Rows change region (a customer moves, an order changes customer) and are deleted, so the sums go
through subtractions on the repartition topic's change records. The final sum of a region does not
depend on how the daemon interleaves partitions (each key's updates stay in order), so the
expectation is one driver fed every record; the daemon's is the last record of the region on the
output topic."""

from __future__ import annotations

import asyncio
import json
import random
import time
from typing import Any

import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder, Topology
from tests.support.daemon import decode, read_to_end, running_app
from tests.support.kafka import Out, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

PARTITIONS = 4
UPDATES = 6_000


def build(orders: str, customers: str, output: str) -> Topology:
    b = StreamsBuilder()
    order_table = b.table(orders, key_serde=serde.STRING, value_serde=serde.JSON)
    customer_table = b.table(customers, key_serde=serde.STRING, value_serde=serde.JSON)
    # orders are keyed by customer id here (co-partitioned with customers): {"amount": n}
    joined = order_table.left_join(customer_table, lambda o, c: {"amount": o["amount"],
                                                                  "region": None if c is None else c["region"]})
    (joined.group_by(lambda k, v: (v["region"] or "unknown", v["amount"]), key_serde=serde.STRING,
                     value_serde=serde.JSON)
     .aggregate(lambda: 0, lambda k, v, agg: agg + v, lambda k, v, agg: agg - v, name="region-sums",
                value_serde=serde.JSON)
     .to_stream().to(output, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


def updates(base: int, seed: int) -> list[tuple[str, str, Any, int]]:
    """``(topic kind, key, value or None, timestamp)``: orders and customers of 200 customer ids."""
    rng = random.Random(seed)
    out = []
    for i in range(UPDATES):
        key = f"c{rng.randint(0, 199)}"
        if rng.random() < 0.5:
            value = None if rng.random() < 0.1 else {"amount": rng.randint(1, 100)}
            out.append(("orders", key, value, base + i))
        else:
            value = None if rng.random() < 0.1 else {"region": rng.choice(["north", "south", "east", "west"])}
            out.append(("customers", key, value, base + i))
    return out


def _nonzero(sums: dict[str, Any]) -> dict[str, Any]:
    """The regions with a sum (a region that held rows for a while ends at 0 in one run and may never
    appear in the other, depending on the interleaving)."""
    return {region: total for region, total in sums.items() if total}


async def test_table_join_and_group_by_aggregate_on_the_daemon_equal_the_driver(kafka_bootstrap: str,
                                                                              topic_factory: Any) -> None:
    from streamproc.testing import TopologyTestDriver

    orders = await topic_factory(PARTITIONS, prefix="orders")
    customers = await topic_factory(PARTITIONS, prefix="customers")
    output = unique_name("region-sums")
    topics = {"orders": orders, "customers": customers}
    records = updates(int(time.time() * 1000) - 3_600_000, seed=21)

    with TopologyTestDriver(build(orders, customers, output)) as d:
        for kind, key, value, ts in records:
            d.input_topic(topics[kind]).pipe(key, value, ts)
        want = _nonzero({r.key: r.value for r in d.output_topic(output).read_records()})
    assert len(want) >= 4

    for kind, topic in topics.items():
        await produce(kafka_bootstrap, topic, [
            Out(key.encode(), None if value is None else json.dumps(value).encode(), ts)
            for k, key, value, ts in records if k == kind])
    app_id = unique_name("table-join-agg")
    got: dict[str, Any] = {}
    async with running_app(build(orders, customers, output), kafka_bootstrap, app_id):
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                records_out = await read_to_end(kafka_bootstrap, output)
            except ValueError:  # the output topic is created by the first result
                await asyncio.sleep(1)
                continue
            got = _nonzero({key: value for key, value, _ in map(decode, records_out)})
            if got == want:
                break
            await asyncio.sleep(1)
    assert got == want
