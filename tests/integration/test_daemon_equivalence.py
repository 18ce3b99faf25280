"""The daemon's output equals the TopologyTestDriver's for the same input (real broker, 8 partitions).

The record count is ``STREAMPROC_DAEMON_TEST_RECORDS`` (default 100 000). The expectation is computed
per input partition (see ``expected_by_partition``): a task's stream time, sessions and join buffer
are per partition, so partition ``p`` of the output must equal a driver fed partition ``p`` of the
input, in order.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import defaultdict
from typing import Any

import pytest

from tests.support.daemon import (
    beginning_offsets,
    committed_offsets,
    decode,
    expected_by_partition,
    read_topic,
    recent_base_ts,
    running_app,
    wait_until,
)
from tests.support.kafka import Out, consume_all, produce, unique_name

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

RECORDS = int(os.environ.get("STREAMPROC_DAEMON_TEST_RECORDS", "100000"))
PARTITIONS = 8


def click_stream(n: int, seed: int = 7) -> list[tuple[str, dict[str, Any], int]]:
    """``n`` clicks of 1000 users, ~2 s apart on average in event time with +-60 s jitter (out of order,
    within the 5 min grace) and a few very late clicks (dropped as late by the session operator)."""
    rng = random.Random(seed)
    base = recent_base_ts(n * 2_000)
    out = []
    for i in range(n):
        user = f"user-{rng.randrange(1000):04d}"
        ts = base + i * 2_000 + rng.randint(-60_000, 60_000)
        if rng.random() < 0.002:
            ts -= 3 * 3_600_000  # hours late
        out.append((user, {"page": f"/p/{rng.randrange(50)}", "i": i}, ts))
    return out


async def test_sessions_daemon_equals_driver(kafka_bootstrap: str, topic_factory: Any) -> None:
    from functools import partial

    from topologies import sessions

    clicks = await topic_factory(PARTITIONS, prefix="clicks")
    output = unique_name("session-stats")
    build = partial(sessions.build, input=clicks, output=output)
    data = click_stream(RECORDS)
    import json

    await produce(kafka_bootstrap, clicks,
                  (Out(k.encode(), json.dumps(v).encode(), ts) for k, v, ts in data))
    expected = expected_by_partition(build, ((clicks, k, v, ts) for k, v, ts in data), output,
                                     PARTITIONS)
    n_expected = sum(len(v) for v in expected.values())
    assert n_expected > RECORDS // 20, "the input must close many sessions"

    app_id = unique_name("sessions")
    async with running_app(build(), kafka_bootstrap, app_id, wait_tasks=PARTITIONS) as app:
        got_records = await consume_all(kafka_bootstrap, output, expected=n_expected, timeout=240,
                                        group_id=unique_name("reader"))
        await wait_until(lambda: app.metrics.value("streamproc_records_in_total", topic=clicks, partition="0") > 0,
                         30, "metrics")
    got: dict[int, list[Any]] = defaultdict(list)
    for r in got_records:
        got[r.partition].append(decode(r))
    for p in range(PARTITIONS):
        assert got[p] == expected[p], f"partition {p} differs"
    assert app.metrics.value("streamproc_dropped_records_total", reason="late") > 0
    # the final commit covers every input record
    committed = await committed_offsets(kafka_bootstrap, app_id, clicks, PARTITIONS)
    from tests.support.kafka import end_offsets

    assert committed == await end_offsets(kafka_bootstrap, clicks)


CURRENCIES = [f"C{i:02d}" for i in range(40)]


def currency_streams(n: int, seed: int = 11) -> tuple[list[tuple[str, Any, int]], list[tuple[str, dict[str, Any], int]]]:
    """Rates: every currency gets a version every 10 minutes of event time over the payments' span
    (a few are tombstones); payments: ``n`` payments ~50 ms apart with +-3 s jitter (within the 5 s
    grace), a few hours late, a few in a currency without any rate."""
    rng = random.Random(seed)
    span = n * 50
    base = recent_base_ts(span + 600_000)
    rates = []
    for t in range(base - 3_600_000, base + span + 600_000, 600_000):
        for c in CURRENCIES:
            value = None if rng.random() < 0.02 else round(rng.uniform(0.1, 3.0), 4)
            rates.append((c, value, t + rng.randint(0, 599_999)))
    payments = []
    for i in range(n):
        currency = rng.choice(CURRENCIES) if rng.random() > 0.001 else "XXX"
        ts = base + i * 50 + rng.randint(-3_000, 3_000)
        if rng.random() < 0.001:
            ts -= 2 * 3_600_000
        pid = f"pay-{i:07d}"
        payments.append((pid, {"id": pid, "amount": round(rng.uniform(1, 500), 2), "currency": currency}, ts))
    return rates, payments


async def test_currency_daemon_equals_driver(kafka_bootstrap: str, topic_factory: Any,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Rates are loaded (committed) before payments flow, so each payment's join is deterministic;
    per partition of the currency, the set of outputs is independent of the order in which the
    repartitioned payments interleave, so the multisets must be equal."""
    import json
    from collections import Counter

    from tests.support.kafka import end_offsets
    from topologies import currency

    rates_topic = await topic_factory(PARTITIONS, prefix="rates")
    payments_topic = await topic_factory(PARTITIONS, prefix="payments")
    output = unique_name("payments-eur")
    monkeypatch.setattr(currency, "RATES", rates_topic)
    monkeypatch.setattr(currency, "PAYMENTS", payments_topic)
    monkeypatch.setattr(currency, "OUTPUT", output)
    rates, payments = currency_streams(RECORDS)

    def dumps(v: Any) -> bytes | None:
        return None if v is None else json.dumps(v).encode()

    inputs = [(rates_topic, k, v, ts) for k, v, ts in rates] + [(payments_topic, k, v, ts) for k, v, ts in payments]
    expected = expected_by_partition(
        currency.build, inputs, output, PARTITIONS,
        task_key=lambda topic, key, value: key if topic == rates_topic else value["currency"])
    want = Counter((k, json.dumps(v, sort_keys=True), ts) for part in expected.values() for k, v, ts in part)
    n_expected = sum(want.values())
    assert RECORDS // 2 < n_expected < RECORDS

    app_id = unique_name("currency")
    await produce(kafka_bootstrap, rates_topic, (Out(k.encode(), dumps(v), ts) for k, v, ts in rates))
    async with running_app(currency.build(), kafka_bootstrap, app_id, wait_tasks=2 * PARTITIONS,
                           repartition_purge_interval_ms=300):
        rate_ends = await end_offsets(kafka_bootstrap, rates_topic)

        async def rates_committed() -> bool:
            return await committed_offsets(kafka_bootstrap, app_id, rates_topic, PARTITIONS) == rate_ends

        for _ in range(600):
            if await rates_committed():
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the daemon did not commit the rates topic")
        await produce(kafka_bootstrap, payments_topic, (Out(k.encode(), dumps(v), ts) for k, v, ts in payments))
        got_records = await read_topic(kafka_bootstrap, output, n_expected, timeout=240)
        # the repartition topic keeps its records (retention.ms=-1) until the group committed them, then
        # they are deleted (DeleteRecords up to the committed offsets)
        repartition = f"{app_id}-convert-repartition"
        for _ in range(300):
            repartition_ends = await end_offsets(kafka_bootstrap, repartition)
            # a left join repartitions every payment; all of them consumed, committed and purged:
            if (sum(repartition_ends.values()) == len(payments)
                    and await beginning_offsets(kafka_bootstrap, repartition) == repartition_ends):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"repartition topic not purged: log starts "
                                 f"{await beginning_offsets(kafka_bootstrap, repartition)}, ends {repartition_ends}")
    got = Counter((k, json.dumps(v, sort_keys=True), ts) for k, v, ts in map(decode, got_records))
    assert got - want == Counter(), "unexpected outputs"
    assert want - got == Counter(), "missing outputs"
    assert any(json.loads(r.value)["rate"] is None for r in got_records)  # unknown currency / tombstones
