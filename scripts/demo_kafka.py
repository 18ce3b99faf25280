#!/usr/bin/env python3
"""The demo behind ``bash scripts/demo.sh``: a real Kafka, sample click data, results printed.

Steps (each prints what it did):

1. start the local Kafka 4.x broker (``scripts/kafka/localkafka.py``) on a free port, or use
   ``$KAFKA_BOOTSTRAP_SERVERS`` when set (then nothing is started or stopped);
2. create the topics of ``topologies/sessions.py`` (input ``clicks``, output ``session-stats``,
   3 partitions each), prefixed uniquely per run unless ``--topic-prefix`` is given;
3. produce sample click events: ``--users`` users, each with a few bursts of clicks separated by
   more than the topology's session inactivity gap;
4. read everything back in a consumer group and print the round trip: per-partition offsets,
   clicks per user, and whether every record arrived exactly once with key, value, timestamp and
   headers intact;
5. stop the broker it started and delete its data.
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
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "kafka"))
sys.path.insert(0, str(HERE.parent))

import localkafka  # noqa: E402

from topologies import sessions  # noqa: E402

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


async def consume(bootstrap: str, topic: str, expected: int, group: str, timeout: float = 60.0) -> list[Any]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(
        topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False
    )
    await consumer.start()
    got: list[Any] = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for msgs in (await consumer.getmany(timeout_ms=500)).values():
                got.extend(msgs)
        # One more poll: anything beyond `expected` would be a duplicate.
        for msgs in (await consumer.getmany(timeout_ms=1000)).values():
            got.extend(msgs)
        await consumer.commit()
    finally:
        await consumer.stop()
    return got


async def round_trip(bootstrap: str, prefix: str, users: int, seed: int) -> bool:
    clicks, counts = f"{prefix}{sessions.INPUT}", f"{prefix}{sessions.OUTPUT}"
    print("\n[2] create topics")
    await create_topics(bootstrap, {clicks: CLICKS_PARTITIONS, counts: CLICKS_PARTITIONS})

    print("\n[3] produce sample clicks")
    events = sample_clicks(users, seed, start_ms=1_735_689_600_000)  # 2025-01-01T00:00:00Z
    t0 = time.monotonic()
    metas = await produce(bootstrap, clicks, events)
    dt = time.monotonic() - t0
    per_partition = Counter(m.partition for m in metas)
    print(f"  {len(events)} clicks from {users} users in {dt:.2f} s (acks=all); per partition {dict(sorted(per_partition.items()))}")

    print("\n[4] consume them back (consumer group)")
    group = f"{prefix}demo-reader"
    t0 = time.monotonic()
    got = await consume(bootstrap, clicks, len(events), group)
    dt = time.monotonic() - t0
    sent = {(m.partition, m.offset): e for m, e in zip(metas, events, strict=True)}
    intact = sum(
        1
        for r in got
        if (e := sent.get((r.partition, r.offset))) is not None
        and (r.key, r.value, r.timestamp, list(r.headers)) == (e[0], e[1], e[2], e[3])
    )
    offsets_ordered = all(
        [r.offset for r in got if r.partition == p] == sorted(r.offset for r in got if r.partition == p)
        for p in per_partition
    )
    unique = len({(r.partition, r.offset) for r in got})
    ok = len(got) == len(events) == unique == intact and offsets_ordered
    print(f"  received {len(got)} records in {dt:.2f} s: {unique} distinct, {intact} intact "
          f"(key, value, timestamp, headers), per-partition offset order {'kept' if offsets_ordered else 'BROKEN'}")
    by_user: dict[str, int] = defaultdict(int)
    for r in got:
        by_user[r.key.decode()] += 1
    top = sorted(by_user.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    print("  busiest users: " + ", ".join(f"{u}={n}" for u, n in top))
    first = got[0]
    print(f"  e.g. partition {first.partition} offset {first.offset}: key={first.key.decode()} "
          f"value={first.value.decode()} timestamp={first.timestamp}")
    print(f"  round trip {'OK: every click arrived exactly once' if ok else 'FAILED'}")
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--port", type=int, default=int(os.environ.get("KAFKA_PORT", "0")) or None,
                        help="client port of the local broker (default: a free port)")
    parser.add_argument("--topic-prefix", default=None, help="default: demo-<random>- (fresh topics each run)")
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
        ok = asyncio.run(round_trip(bootstrap, prefix, args.users, args.seed))
    finally:
        if handle is not None:
            print("\n[5] stop kafka")
            handle.stop()
            print(f"  stopped pid {handle.pids[0]}, removed {handle.data_dir}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
