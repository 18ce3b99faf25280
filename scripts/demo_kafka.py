"""The demo behind ``bash scripts/demo.sh``: a real Kafka, sample click data, results printed.

Steps (each prints what it did):

1. start the local Kafka 4.x broker (``scripts/kafka/localkafka.py``) on a free port, or use
   ``$KAFKA_BOOTSTRAP_SERVERS`` when set (then nothing is started or stopped);
2. create the topics of ``topologies/sessions.py`` (input ``clicks``, output ``session-stats``,
   3 partitions each), prefixed uniquely per run unless ``--topic-prefix`` is given;
3. produce sample click events: ``--users`` users, each with a few bursts of clicks separated by
   more than the topology's session inactivity gap;
4. run the topology on the streamproc daemon (``StreamApp``, the engine of ``streamproc run``),
   read its output topic and print the sessions, checking they equal what the
   TopologyTestDriver computes for the same input (one click per partition at the end, later than
   every session's gap + grace, closes the last sessions);
5. stop the broker it started and delete its data.

Run from the repository root: ``python -m scripts.demo_kafka [--users N] [--seed S] [--port P]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import time
import uuid
from collections import Counter
from typing import Any

from scripts.kafka import localkafka
from topologies import sessions, wordcount

CLICKS_PARTITIONS = 3
SESSION_GAP_MS = sessions.GAP_MS
PAGES = ("/", "/search", "/item/42", "/item/7", "/cart", "/checkout")


def sample_clicks(users: int, seed: int, start_ms: int) -> list[tuple[bytes, bytes, int, list[tuple[str, bytes]]]]:
    """(key, value, timestamp, headers) click events in timestamp order, with session bursts."""
    rng = random.Random(seed)
    events = []
    for u in range(users):
        user = f"user-{u:03d}"
        t = start_ms + rng.randrange(60_000)
        for _burst in range(rng.randint(1, 4)):
            for _ in range(rng.randint(2, 12)):
                t += rng.randrange(1_000, min(90_000, SESSION_GAP_MS))  # within a session: < gap apart
                page = rng.choice(PAGES)
                value = json.dumps({"user": user, "page": page, "ts": t}).encode()
                events.append((user.encode(), value, t, [("source", b"demo")]))
            t += SESSION_GAP_MS + rng.randrange(1_000, 600_000)  # a new session
    events.sort(key=lambda e: e[2])
    return events


async def create_topics(bootstrap: str, names: dict[str, int]) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        new = [NewTopic(n, p, 1) for n, p in names.items() if n not in existing]
        if new:
            await admin.create_topics(new)
        deadline = time.monotonic() + 60
        while True:
            described = await admin.describe_topics(list(names))
            ready = {
                t["topic"]
                for t in described
                if t["error_code"] == 0
                and len(t["partitions"]) == names[t["topic"]]
                and all(p["leader"] >= 0 for p in t["partitions"])
            }
            if ready == set(names):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"topics not ready after 60 s: {described}")
            await asyncio.sleep(0.2)
    finally:
        await admin.close()
    for n, p in names.items():
        print(f"  topic {n} ({p} partition{'s' if p > 1 else ''})")


async def produce(bootstrap: str, topic: str, events: list[Any]) -> list[Any]:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(topic, key=k, value=v, timestamp_ms=ts, headers=h) for k, v, ts, h in events
        ]
        return list(await asyncio.gather(*futures))
    finally:
        await producer.stop()


def closers(partitions: int, after_ms: int) -> list[tuple[bytes, bytes, int, list[tuple[str, bytes]]]]:
    """One click per partition at ``after_ms``: it advances each task's stream time past every
    earlier session's ``end + gap + grace``, so those sessions close and are emitted."""
    from streamproc.engine.partitioning import partition_for

    out: dict[int, tuple[bytes, bytes, int, list[tuple[str, bytes]]]] = {}
    n = 0
    while len(out) < partitions:
        key = f"closer-{n}".encode()
        p = partition_for(key, partitions)
        if p not in out:
            value = json.dumps({"user": key.decode(), "page": "/", "ts": after_ms}).encode()
            out[p] = (key, value, after_ms, [("source", b"demo")])
        n += 1
    return [out[p] for p in sorted(out)]


def expected_sessions(events: list[Any], partitions: int, clicks_topic: str, stats_topic: str) -> dict[tuple[str, int], dict[str, Any]]:
    """What the daemon must write: the TopologyTestDriver fed each partition's clicks in order."""
    from streamproc.engine.partitioning import partition_for
    from streamproc.testing import TopologyTestDriver

    expected: dict[tuple[str, int], dict[str, Any]] = {}
    for p in range(partitions):
        topology = sessions.build(input=clicks_topic, output=stats_topic)
        with TopologyTestDriver(topology, application_id="demo-expected") as driver:
            clicks = driver.input_topic(clicks_topic)
            for k, v, ts, _h in events:
                if partition_for(k, partitions) == p:
                    clicks.pipe(k.decode(), json.loads(v), ts)
            for r in driver.output_topic(stats_topic).read_records():
                expected[(r.key, r.value["start"])] = r.value
    return expected


async def read_output(bootstrap: str, topic: str, expected: int, timeout: float) -> list[Any]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    got: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(msgs)
        for msgs in (await consumer.getmany(timeout_ms=1000)).values():  # anything more is a duplicate
            got.extend(msgs)
    finally:
        await consumer.stop()
    return got


async def run_demo(bootstrap: str, prefix: str, users: int, seed: int, produce_only: bool = False) -> bool:
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp

    clicks, stats = f"{prefix}{sessions.INPUT}", f"{prefix}{sessions.OUTPUT}"
    print("\n[2] create topics")
    await create_topics(bootstrap, {clicks: CLICKS_PARTITIONS, stats: CLICKS_PARTITIONS})

    print("\n[3] produce sample clicks")
    # Recent event times: the broker applies its retention (7 days) to record timestamps.
    start_ms = (int(time.time() * 1000) - 6 * 3_600_000) // 3_600_000 * 3_600_000
    events = sample_clicks(users, seed, start_ms=start_ms)
    last = max(e[2] for e in events)
    events += closers(CLICKS_PARTITIONS, last + sessions.GAP_MS + sessions.GRACE_MS + 1)
    t0 = time.monotonic()
    metas = await produce(bootstrap, clicks, events)
    per_partition = Counter(m.partition for m in metas)
    print(f"  {len(events)} clicks from {users} users in {time.monotonic() - t0:.2f} s (acks=all); "
          f"per partition {dict(sorted(per_partition.items()))}")

    if produce_only:
        print("\n[4] --produce-only: a separately running `streamproc run topologies.sessions` processes them")
        return True
    print("\n[4] run the sessions topology (topologies/sessions.py) on the streamproc daemon")
    expected = expected_sessions(events, CLICKS_PARTITIONS, clicks, stats)
    app_id = f"demo-sessions-{uuid.uuid4().hex[:6]}"
    app = StreamApp(sessions.build(input=clicks, output=stats), Config(application_id=app_id, bootstrap_servers=bootstrap,
                                             commit_interval_ms=500))
    t0 = time.monotonic()
    runner = asyncio.create_task(app.run())
    try:
        got = await read_output(bootstrap, stats, len(expected), timeout=90)
    finally:
        if not runner.done():
            await app.stop()
        await runner
    dt = time.monotonic() - t0
    produced = {(r.key.decode(), json.loads(r.value)["start"]): json.loads(r.value) for r in got}
    print(f"  application {app_id}: {len(got)} sessions written to {stats} in {dt:.2f} s "
          f"(start-up, processing, commit and shutdown included)")
    print(f"  {'user':<10} {'start (UTC)':<20} {'clicks':>6} {'duration':>9}")
    for (user, start), v in sorted(produced.items())[:12]:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(start / 1000))
        print(f"  {user:<10} {when:<20} {v['clicks']:>6} {v['duration_ms'] / 1000:>8.0f}s")
    if len(produced) > 12:
        print(f"  ... and {len(produced) - 12} more")
    ok = len(got) == len(produced) and produced == expected
    print(f"  {'OK' if ok else 'MISMATCH'}: the daemon's {len(got)} sessions "
          f"{'equal' if ok else 'differ from'} the TopologyTestDriver's {len(expected)} for the same input")
    return ok


SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a stream is a table in motion and a table is a stream at rest",
    "Don't stop the stream: count every word of it",
    "the fox and the dog count the words of the stream",
]


async def run_wordcount(bootstrap: str, prefix: str) -> bool:
    """Word count (topologies/wordcount.py, a non-windowed aggregation through a repartition topic)
    on the daemon; its final count per word must equal the TopologyTestDriver's."""
    from streamproc.config import Config
    from streamproc.runtime.app import StreamApp
    from streamproc.testing import TopologyTestDriver

    print("\n[5] run the word-count topology (topologies/wordcount.py) on the streamproc daemon")
    source, counts = f"{prefix}{wordcount.INPUT}", f"{prefix}{wordcount.OUTPUT}"
    await create_topics(bootstrap, {source: CLICKS_PARTITIONS, counts: CLICKS_PARTITIONS})
    now = int(time.time() * 1000)
    lines = [(None, s.encode(), now + i, []) for i, s in enumerate(SENTENCES * 25)]
    await produce(bootstrap, source, lines)
    build = lambda: wordcount.build(input=source, output=counts)
    with TopologyTestDriver(build(), application_id="expected") as driver:
        for _, sentence, ts, _ in lines:
            driver.input_topic(source).pipe(None, sentence.decode(), ts)
        expected = driver.output_topic(counts).read_key_values_to_map()
    occurrences = sum(len(wordcount.words(line.decode())) for _, line, _, _ in lines)
    app = StreamApp(build(), Config(application_id=f"demo-wordcount-{uuid.uuid4().hex[:6]}",
                                    bootstrap_servers=bootstrap, commit_interval_ms=500))
    runner = asyncio.create_task(app.run())
    try:
        got = await read_output(bootstrap, counts, occurrences, timeout=90)
    finally:
        if not runner.done():
            await app.stop()
        await runner
    final = {r.key.decode(): json.loads(r.value) for r in sorted(got, key=lambda r: (r.partition, r.offset))}
    top = sorted(final.items(), key=lambda kv: (-kv[1], kv[0]))[:8]
    print(f"  {len(lines)} sentences, {len(got)} count updates; top words: "
          + ", ".join(f"{w} {n}" for w, n in top))
    ok = final == expected
    print(f"  {'OK' if ok else 'MISMATCH'}: the daemon's counts of {len(final)} words "
          f"{'equal' if ok else 'differ from'} the TopologyTestDriver's")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, default=int(os.environ.get("KAFKA_PORT", "0")) or None,
                        help="client port of the local broker (default: a free port)")
    parser.add_argument("--topic-prefix", default=None, help="default: demo-<random>- (fresh topics each run)")
    parser.add_argument("--produce-only", action="store_true",
                        help="only create the topics and produce the clicks (docker compose's demo-data)")
    args = parser.parse_args(argv)
    # aiokafka logs transient retries (e.g. NotLeaderForPartition right after topic creation) that
    # it recovers from by itself; the demo checks and prints the outcome, so only hard failures show.
    logging.basicConfig(level=logging.WARNING, format="  [%(name)s] %(levelname)s %(message)s")
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    prefix = args.topic_prefix if args.topic_prefix is not None else f"demo-{uuid.uuid4().hex[:6]}-"

    external = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    handle = None
    print("[1] kafka")
    if external:
        bootstrap = external
        print(f"  using KAFKA_BOOTSTRAP_SERVERS={bootstrap}")
    else:
        handle = localkafka.start_single(args.port)
        bootstrap = handle.bootstrap
    try:
        ok = asyncio.run(run_demo(bootstrap, prefix, args.users, args.seed, args.produce_only))
        if ok and not args.produce_only:
            ok = asyncio.run(run_wordcount(bootstrap, prefix))
    finally:
        if handle is not None:
            print("\n[6] stop kafka")
            handle.stop()
            print(f"  stopped pid {handle.pids[0]}, removed {handle.data_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
