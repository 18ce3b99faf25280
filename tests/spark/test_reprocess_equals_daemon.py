"""``streamproc reprocess --order offset`` over a Kafka topic equals what the live daemon wrote from
the same topic (real broker, real daemon, real PySpark; the command run in-process).

* **sessions** (one sub-topology, one source): a task's input is one partition, so the daemon's
  order is the partition's offset order, exactly what ``--order offset`` replays. The daemon's
  output partition ``p`` (keys are users, partitioned like the input) must equal Spark's update
  stream of task ``p``, record for record, in order.
* **currency** (two sub-topologies: payments re-keyed through a repartition topic, then
  left-joined with the versioned ``rates`` table): the live daemon interleaves a task's two inputs
  (``rates[p]`` and the repartition partition ``p``) as its fetches return them, and several tasks
  write each repartition partition; ``--order offset`` fixes one interleaving (smallest head
  timestamp). The test makes the result independent of the interleaving, as a user re-running
  history would see it: the daemon consumes (and commits) every rate before the first payment is
  produced, and the whole timeline fits in the table's 1 h history, so each payment's as-of lookup
  finds the same versions in both runs. Payment ids are unique keys, so the outputs are compared
  per key (value and timestamp); the order across keys depends on that interleaving.

Event times are recent (the broker deletes records by timestamp) and the topics keep their records.
"""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest

from streamproc.cli import main as streamproc_main
from tests.support.daemon import (
    committed_offsets,
    read_to_end,
    recent_base_ts,
    running_app,
)
from tests.support.kafka import Out as Produce
from tests.support.kafka import end_offsets, produce, unique_name
from tests.support.spark import In, assign_positions, gen_sessions_input

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

P = 4
N = 20_000
KEEP = {"retention.ms": "-1"}


async def _load(bootstrap: str, topic: str, records: list[In]) -> None:
    await produce(bootstrap, topic, [Produce(r.key, r.value, r.timestamp, (), r.partition) for r in records],
                  linger_ms=20, max_batch_size=512 * 1024)


async def _wait_committed(bootstrap: str, group: str, topic: str) -> None:
    ends = await end_offsets(bootstrap, topic)
    for _ in range(1200):
        if await committed_offsets(bootstrap, group, topic, P) == ends:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"the daemon did not commit all of {topic}: "
                         f"{await committed_offsets(bootstrap, group, topic, P)} != {ends}")


async def _run_daemon_until_committed(topology: Any, bootstrap: str, topics: dict[str, list[In]],
                                      internal: tuple[str, ...] = ()) -> None:
    """Run a daemon; load ``topics`` (in dict order, each fully consumed and committed before the
    next is produced); wait until the ``internal`` topics (names after ``<application_id>-``) are
    committed too; stop it (final commit)."""
    app_id = unique_name("daemon")
    async with running_app(topology, bootstrap, app_id):
        for topic, records in topics.items():
            await _load(bootstrap, topic, records)
            await _wait_committed(bootstrap, app_id, topic)
        for name in internal:
            await _wait_committed(bootstrap, app_id, f"{app_id}-{name}")


def _reprocess(module: str, inputs: dict[str, str], bootstrap: str, out: Path) -> None:
    argv = ["reprocess", module, "--order", "offset", "--updates", "--output", f"json:{out}",
            "--bootstrap-servers", bootstrap, "--quiet"]
    for topic, kafka_topic in inputs.items():
        argv += ["--input", f"{topic}=kafka:{kafka_topic}"]
    assert streamproc_main(argv) == 0


def _spark_updates(spark: Any, out: Path) -> list[Any]:
    """Spark's update stream as rows (text encoding: key/value are the records' UTF-8 text)."""
    rows = spark.read.json(str(out / "updates")).collect()
    return sorted(rows, key=lambda r: (r["topic"], r["partition"], r["offset"]))


def _recent(records: list[In]) -> list[In]:
    """The generated records moved to end an hour before now (same spacing, same order)."""
    lo = min(r.timestamp for r in records)
    span = max(r.timestamp for r in records) - lo
    shift = recent_base_ts(span) - lo
    return [r._replace(timestamp=r.timestamp + shift) for r in records]


async def test_sessions_reprocess_equals_the_daemon(spark: Any, kafka_bootstrap: str, topic_factory: Any,
                                                    tmp_path: Path) -> None:
    from topologies import sessions

    # a user clicks about every 30 minutes (the gap): sessions merge, close, and a few clicks are late
    records = _recent(gen_sessions_input(N, partitions=P, seed=17, step_ms=600))
    clicks = await topic_factory(partitions=P, prefix="clicks", configs=KEEP)
    output = await topic_factory(partitions=P, prefix="session-stats", configs=KEEP)
    await _run_daemon_until_committed(sessions.build(input=clicks, output=output), kafka_bootstrap,
                                      {clicks: records})
    daemon: dict[int, list[tuple[str, str, int]]] = {p: [] for p in range(P)}
    for m in sorted(await read_to_end(kafka_bootstrap, output), key=lambda m: (m.partition, m.offset)):
        daemon[m.partition].append((m.key.decode(), m.value.decode(), m.timestamp))
    assert sum(map(len, daemon.values())) > N // 20, "the input must close many sessions"

    _reprocess("topologies.sessions", {"clicks": clicks}, kafka_bootstrap, tmp_path / "out")
    spark_by_task: dict[int, list[tuple[str, str, int]]] = {p: [] for p in range(P)}
    for r in _spark_updates(spark, tmp_path / "out"):
        spark_by_task[r["partition"]].append((r["key"], r["value"], r["timestamp"]))
    for p in range(P):
        assert spark_by_task[p] == daemon[p], f"partition {p} differs"


CURRENCIES = ("USD", "GBP", "JPY", "CHF", "SEK", "NOK", "DKK", "PLN", "CZK", "HUF", "EUR", "AUD")


def _currency_input(n: int, seed: int = 29) -> tuple[list[In], list[In]]:
    """Rates and payments over 50 minutes (inside the 1 h history): rates of each currency every
    ~2 minutes (2% tombstones), in time order per currency; ``n`` payments ~140 ms apart with up to
    3 s of jitter (inside the 5 s grace), 1% up to a minute late, a few in a currency without rates."""
    rng = random.Random(seed)
    base = recent_base_ts(3_000_000)
    rates = []
    for c in CURRENCIES:
        t = base + rng.randrange(180_000)
        while t < base + 3_000_000:
            value = None if rng.random() < 0.02 else json.dumps(round(rng.uniform(0.01, 3.0), 4)).encode()
            rates.append(("rates", c.encode(), value, t))
            t += rng.randrange(60_000, 180_000)
    rates.sort(key=lambda r: r[3])
    payments = []
    for i in range(n):
        ts = base + 60_000 + i * 140 + rng.randrange(3_000)
        if rng.random() < 0.01:
            ts -= rng.randrange(60_000)
        currency = rng.choice(CURRENCIES) if rng.random() > 0.002 else "XXX"
        pid = f"p{i:07d}"
        pay = {"id": pid, "amount": round(rng.uniform(1, 500), 2), "currency": currency}
        payments.append(("payments", pid.encode(), json.dumps(pay, separators=(",", ":")).encode(), ts))
    return assign_positions(rates, P), assign_positions(payments, P)


async def test_currency_reprocess_equals_the_daemon(spark: Any, kafka_bootstrap: str, topic_factory: Any,
                                                    tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from topologies import currency

    rates, payments = _currency_input(N)
    rates_topic = await topic_factory(partitions=P, prefix="rates", configs=KEEP)
    payments_topic = await topic_factory(partitions=P, prefix="payments", configs=KEEP)
    output = await topic_factory(partitions=P, prefix="payments-eur", configs=KEEP)
    with monkeypatch.context() as m:  # the daemon reads and writes the test's topics
        m.setattr(currency, "RATES", rates_topic)
        m.setattr(currency, "PAYMENTS", payments_topic)
        m.setattr(currency, "OUTPUT", output)
        topology = currency.build()
    inputs = {rates_topic: rates, payments_topic: payments}
    await _run_daemon_until_committed(topology, kafka_bootstrap, inputs, internal=("convert-repartition",))
    daemon: dict[str, list[tuple[str, int]]] = {}
    for msg in await read_to_end(kafka_bootstrap, output):
        daemon.setdefault(msg.key.decode(), []).append((msg.value.decode(), msg.timestamp))

    _reprocess("topologies.currency", {"rates": rates_topic, "payments": payments_topic}, kafka_bootstrap,
               tmp_path / "out")
    spark_by_key: dict[str, list[tuple[str, int]]] = {}
    for r in _spark_updates(spark, tmp_path / "out"):
        spark_by_key.setdefault(r["key"], []).append((r["value"], r["timestamp"]))
    assert spark_by_key == daemon
    # the comparison is not vacuous: most payments come out (a few wait in the grace buffer at the
    # end), most found a rate, some did not (before their currency's first rate, tombstones, "XXX")
    assert len(payments) - 200 < len(daemon) <= len(payments)
    assert all(len(v) == 1 for v in daemon.values())
    rated = [json.loads(v[0][0])["rate"] for v in daemon.values()]
    assert sum(r is not None for r in rated) > len(rated) * 0.8
    assert any(r is None for r in rated)
