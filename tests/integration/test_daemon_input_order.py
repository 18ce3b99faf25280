"""The daemon processes each task's inputs in timestamp order (real broker, several partitions).

A task that reads two topics (a windowed stream-stream join; a stream left-joined as of a versioned
table with grace) must see them merged by the ordering rule, however the consumer's fetches return
them: the daemon's output equals, as a multiset, the output of one TopologyTestDriver per task fed
that task's partitions merged by the rule (smallest head timestamp first, ties to the topic that
sorts first; ``streamproc.spark.ordering.offset_order`` is the rule's reference implementation).

* backlog: both topics produced before the daemon starts, timestamps interleaved between them;
* live: two slow producers writing interleaved timestamps while the daemon runs.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pytest

from streamproc import serde
from streamproc.dsl import EmitStrategy, JoinWindows, StreamsBuilder, TimeWindows, Topology
from streamproc.spark.ordering import offset_order
from streamproc.testing import TopologyTestDriver
from tests.support.daemon import recent_base_ts, running_app, wait_until
from tests.support.kafka import Out, consume_all, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

PARTITIONS = 4
S, J = serde.STRING, serde.JSON


class Sent(NamedTuple):
    """An input record as the broker stored it."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str
    value: Any


def views_and_clicks(views: str, clicks: str, joined: str, counts: str) -> Topology:
    """Views inner-joined with clicks of the same user within 10 s (grace 2 s), and views per user
    per minute (tumbling, grace 5 s, emitted on close): one sub-topology reading both topics."""
    b = StreamsBuilder()
    v = b.stream(views, key_serde=S, value_serde=J)
    c = b.stream(clicks, key_serde=S, value_serde=J)
    (v.join(c, lambda view, click: {"view": view["i"], "click": click["i"]},
            JoinWindows.of_time_difference_and_grace(10_000, 2_000), name="view-click")
      .to(joined, key_serde=S, value_serde=J))
    (v.group_by_key()
      .windowed_by(TimeWindows.of_size_and_grace(60_000, 5_000))
      .count(name="views-per-user", emit=EmitStrategy.ON_WINDOW_CLOSE)
      .to_stream()
      .map(lambda w, n: (w.key, {"start": w.start, "views": n}), name="count-out")
      .to(counts, key_serde=S, value_serde=J))
    return b.build()


def payments_at_rates(rates: str, payments: str, out: str) -> Topology:
    """Payments (keyed by currency) left-joined as of the versioned rates table, grace 5 s."""
    b = StreamsBuilder()
    table = b.table(rates, name="rates", versioned=3_600_000, key_serde=S, value_serde=J)
    (b.stream(payments, key_serde=S, value_serde=J)
      .left_join(table, lambda p, rate: {**p, "rate": rate}, grace=5_000, name="convert")
      .to(out, key_serde=S, value_serde=J))
    return b.build()


async def produce_all(bootstrap: str, topic: str, records: Sequence[tuple[str, Any, int]]) -> list[Sent]:
    metas = await produce(bootstrap, topic, [Out(k.encode(), json.dumps(v).encode(), ts) for k, v, ts in records])
    return [Sent(topic, m.partition, m.offset, ts, k, v) for (k, v, ts), m in zip(records, metas)]


def expected(build: Callable[[], Topology], sent: Sequence[Sent], outputs: Sequence[str]) -> tuple[Counter, int]:
    """One driver per task partition fed that partition's records merged by the rule; returns the
    outputs as a multiset and the records the drivers dropped as late."""
    want: Counter = Counter()
    late = 0
    for p in range(PARTITIONS):
        merged = offset_order([r for r in sent if r.partition == p])
        with TopologyTestDriver(build(), application_id="expected") as driver:
            for r in merged:
                driver.input_topic(r.topic).pipe(r.key, r.value, r.timestamp)
            for topic in outputs:
                want.update((topic, rec.key, json.dumps(rec.value, sort_keys=True), rec.timestamp)
                            for rec in driver.output_topic(topic).read_records())
            late += driver.metrics.get("dropped_records_late", 0)
    return want, late


async def daemon_output(bootstrap: str, outputs: dict[str, int]) -> Counter:
    got: Counter = Counter()
    for topic, n in outputs.items():
        for r in await consume_all(bootstrap, topic, expected=n, timeout=90):
            got[(topic, r.key.decode(), json.dumps(json.loads(r.value), sort_keys=True), r.timestamp)] += 1
    return got


def view_click_records(n: int, seed: int, base: int) -> tuple[list[tuple[str, Any, int]], list[tuple[str, Any, int]]]:
    """``n`` views and ``n`` clicks of 40 users, interleaved in time (a view every second, a click
    300 ms after it, each with up to 400 ms of jitter: a little disorder within each topic)."""
    rng = random.Random(seed)
    views, clicks = [], []
    for i in range(n):
        views.append((f"u{rng.randrange(40):02d}", {"i": i}, base + i * 1_000 + rng.randint(0, 400)))
        clicks.append((f"u{rng.randrange(40):02d}", {"i": i}, base + i * 1_000 + 300 + rng.randint(0, 400)))
    return views, clicks


def rate_payment_records(n: int, seed: int, base: int) -> tuple[list[tuple[str, Any, int]], list[tuple[str, Any, int]]]:
    """Rates of 12 currencies, a new version of each every 30 s (a few tombstones), and ``n``
    payments every 200 ms: most payments need a rate that is later in the rates topic than the
    payments before it, so processing one topic ahead of the other gives wrong rates."""
    rng = random.Random(seed)
    currencies = [f"C{i:02d}" for i in range(12)]
    span = n * 200
    rates = []
    for t in range(base - 60_000, base + span + 30_000, 30_000):
        for c in currencies:
            value = None if rng.random() < 0.03 else round(rng.uniform(0.1, 3.0), 3)
            rates.append((c, value, t + rng.randint(0, 29_999)))
    rates.sort(key=lambda r: r[2])
    payments = [(c := rng.choice(currencies), {"id": i, "amount": rng.randint(1, 500), "c": c},
                 base + i * 200 + rng.randint(0, 1_500)) for i in range(n)]
    return rates, payments


async def test_backlog_view_click_join_and_count_in_timestamp_order(kafka_bootstrap: str, topic_factory: Any) -> None:
    views, clicks = await topic_factory(PARTITIONS, prefix="views"), await topic_factory(PARTITIONS, prefix="clicks")
    joined, counts = unique_name("joined"), unique_name("counts")
    v, c = view_click_records(2_000, seed=5, base=recent_base_ts(2_100_000))
    sent = await produce_all(kafka_bootstrap, views, v) + await produce_all(kafka_bootstrap, clicks, c)

    def build() -> Topology:
        return views_and_clicks(views, clicks, joined, counts)

    want, late = expected(build, sent, [joined, counts])
    n_joined = sum(n for (topic, *_), n in want.items() if topic == joined)
    assert n_joined > 500, "the input must join"
    async with running_app(build(), kafka_bootstrap, unique_name("order-join"), wait_tasks=PARTITIONS,
                           max_poll_records=500) as app:
        got = await daemon_output(kafka_bootstrap, {joined: n_joined, counts: sum(want.values()) - n_joined})
        await wait_until(lambda: app.metrics.value("streamproc_records_in_total") >= len(sent), 60, "all input")
    assert got == want
    assert app.metrics.value("streamproc_dropped_records_total", reason="late") == late
    assert app.metrics.value("streamproc_enforced_processing_total") == 0


async def test_backlog_payments_as_of_rates_in_timestamp_order(kafka_bootstrap: str, topic_factory: Any) -> None:
    rates, payments = await topic_factory(PARTITIONS, prefix="rates"), await topic_factory(PARTITIONS, prefix="pay")
    out = unique_name("converted")
    r, p = rate_payment_records(3_000, seed=9, base=recent_base_ts(700_000))
    sent = await produce_all(kafka_bootstrap, payments, p) + await produce_all(kafka_bootstrap, rates, r)

    def build() -> Topology:
        return payments_at_rates(rates, payments, out)

    want, _ = expected(build, sent, [out])
    # a left join: one output per payment, but for the last ones still in the grace buffer
    assert len(p) - 100 < sum(want.values()) <= len(p)
    with_rate = sum(n for (_, _, value, _), n in want.items() if json.loads(value)["rate"] is not None)
    assert with_rate > len(p) * 0.8
    async with running_app(build(), kafka_bootstrap, unique_name("order-asof"), wait_tasks=PARTITIONS,
                           max_poll_records=500):
        got = await daemon_output(kafka_bootstrap, {out: sum(want.values())})
    assert got == want


async def test_live_interleaved_producers(kafka_bootstrap: str, topic_factory: Any) -> None:
    """Two producers, one per topic, each sending one record at a time while the daemon runs,
    timestamps interleaved between them (event time runs 20x faster than the wall clock): the output
    is the rule's, and nothing is dropped as late."""
    from aiokafka import AIOKafkaProducer

    views, clicks = await topic_factory(PARTITIONS, prefix="views"), await topic_factory(PARTITIONS, prefix="clicks")
    joined, counts = unique_name("joined"), unique_name("counts")
    rng = random.Random(8)
    base = recent_base_ts(300_000)
    v = [(f"u{rng.randrange(40):02d}", {"i": i}, base + i * 200 + rng.randint(0, 100)) for i in range(800)]
    c = [(f"u{rng.randrange(40):02d}", {"i": i}, base + i * 200 + 100 + rng.randint(0, 100)) for i in range(800)]

    def build() -> Topology:
        return views_and_clicks(views, clicks, joined, counts)

    sent: list[Sent] = []

    async def slow(topic: str, records: list[tuple[str, Any, int]]) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=0)
        await producer.start()
        try:
            for key, value, ts in records:
                meta = await (await producer.send(topic, json.dumps(value).encode(), key.encode(), timestamp_ms=ts))
                sent.append(Sent(topic, meta.partition, meta.offset, ts, key, value))
                await asyncio.sleep(0.01)
        finally:
            await producer.stop()

    async with running_app(build(), kafka_bootstrap, unique_name("order-live"), wait_tasks=PARTITIONS) as app:
        await asyncio.gather(slow(views, v), slow(clicks, c))
        want, late = expected(build, sent, [joined, counts])
        n_joined = sum(n for (topic, *_), n in want.items() if topic == joined)
        assert n_joined > 500
        got = await daemon_output(kafka_bootstrap, {joined: n_joined, counts: sum(want.values()) - n_joined})
    assert late == 0
    assert app.metrics.value("streamproc_dropped_records_total", reason="late") == 0
    assert got == want
