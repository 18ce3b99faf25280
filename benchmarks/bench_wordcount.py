"""Word count (``topologies.wordcount``): sentences/s in-process (Task alone) and on the daemon, with
the daemon's ratio to an aiokafka passthrough over the same input; peak RSS per phase.

Sentences (``--sentences``, default 1M; 1-8 words of a 5000-word vocabulary, string keys or none,
timestamps 10 ms apart) are generated once. Each phase runs in its own process (CPU time and peak
RSS per phase), on uvloop:

Peak RSS includes the phase's own copy of the input where it has one (task: 1M sentences and their
records). Phases:

* **task**: the two sub-topologies' ``Task`` s (split + repartition sink, then count + sink) called
  directly in batches of 5000, the repartition records handed from one to the other in memory,
  outputs and changelogs drained after each batch; no Kafka;
* **passthrough** (the ceiling): the sentences already on a 4-partition topic, a consumer re-sending
  each record unchanged (``create_batch``/``send_batch``), offsets committed after the acks;
* **daemon**: ``StreamApp`` running word count over the same backlog (4 partitions: the input and
  the repartition topic ``words``), until one output record per word occurrence has been produced.

Broker: ``--bootstrap`` or ``$KAFKA_BOOTSTRAP_SERVERS``; otherwise a local one is started with
``scripts/kafka/localkafka.py`` and stopped at the end. ``--quick``: 100 000 sentences.

Run from the repository root: ``python -m benchmarks.bench_wordcount [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import time
import uuid
from collections.abc import Iterator
from typing import Any

from benchmarks.harness import (
    Row,
    app_running,
    broker,
    create_topics,
    end_offsets,
    measured,
    passthrough_until,
    produce_batched,
    run_in_child,
)

PARTITIONS = 4
VOCABULARY = 5_000
BATCH = 5_000




def sentences(n: int) -> list[tuple[bytes | None, bytes, int]]:
    """``(key bytes or None, sentence bytes, timestamp)``."""
    rng = random.Random(5)
    vocab = [f"w{i}" for i in range(VOCABULARY)]
    base = (int(time.time()) - 3_600) * 1_000 - n * 10
    out = []
    for i in range(n):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
        key = None if rng.random() < 0.2 else f"doc-{rng.randrange(1000)}".encode()
        out.append((key, text.encode(), base + i * 10))
    return out


def _task(n: int) -> dict[str, Any]:
    from streamproc.engine.task import Task
    from streamproc.records import Record
    from topologies import wordcount

    data = sentences(n)
    topology = wordcount.build()
    split, count = Task(topology, 0, 0, "bench"), Task(topology, 1, 0, "bench")
    (repartition,) = count.source_topics
    started = time.perf_counter()
    out = offset = 0
    for i in range(0, n, BATCH):
        split.process(wordcount.INPUT, 0, [Record(k, v, ts, (), wordcount.INPUT, 0, i + j)
                                           for j, (k, v, ts) in enumerate(data[i:i + BATCH])])
        words = split.drain_outputs()
        split.drain_changelogs()
        count.process(repartition, 0, [Record(r.key, r.value, r.timestamp, (), repartition, 0, offset + j)
                                       for j, r in enumerate(words)])
        offset += len(words)
        out += len(count.drain_outputs())
        count.drain_changelogs()
    return {"elapsed": time.perf_counter() - started, "words": out}




def _rows(topic: str, n: int) -> Iterator[Row]:
    from streamproc.engine.partitioning import partition_for

    for i, (key, value, ts) in enumerate(sentences(n)):
        yield topic, partition_for(key, PARTITIONS) if key is not None else i % PARTITIONS, key, value, ts


async def _produce(bootstrap: str, topic: str, n: int) -> dict[Any, int]:
    await produce_batched(bootstrap, _rows(topic, n))
    return await end_offsets(bootstrap, [topic], PARTITIONS)


async def _passthrough(bootstrap: str, topic: str, ends: dict[Any, int], n_words: int) -> dict[str, Any]:
    return {"elapsed": await passthrough_until(bootstrap, [topic], ends, PARTITIONS, name="bench-wc-pass")}


async def _daemon(bootstrap: str, topic: str, ends: dict[Any, int], n_words: int) -> dict[str, Any]:
    from streamproc.config import Config
    from topologies import wordcount

    tag = uuid.uuid4().hex[:8]
    output = f"bench-wc-out-{tag}"
    config = Config(application_id=f"bench-wc-{tag}", bootstrap_servers=bootstrap, commit_interval_ms=500,
                    log_level="WARNING")
    async with app_running(wordcount.build(input=topic, output=output), config, 2 * PARTITIONS) as run:
        started = time.perf_counter()
        await run.until(lambda: run.app.metrics.value("streamproc_records_out_total", topic=output) >= n_words, 0.01)
        return {"elapsed": time.perf_counter() - started}


def _child(phase: str, args: tuple[Any, ...], out: Any) -> None:
    import uvloop

    def run() -> dict[str, Any]:
        if phase == "task":
            return _task(*args)
        if phase == "produce":  # in a child too: the parent stays small (ru_maxrss survives fork + exec)
            return {"ends": asyncio.run(_produce(*args))}
        return dict(uvloop.run({"passthrough": _passthrough, "daemon": _daemon}[phase](*args)))

    out.put(measured(run))


def run_phase(phase: str, *args: Any) -> dict[str, Any]:
    return run_in_child(_child, phase, args)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=1_000_000, help="sentences (default 1M)")
    ap.add_argument("--quick", action="store_true", help="100 000 sentences (a smoke run)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"))
    args = ap.parse_args()
    n = 100_000 if args.quick else args.sentences
    task = run_phase("task", n)
    n_words = task["words"]
    print(f"{n:,} sentences, {n_words:,} words (one output record each)")
    rows = [("task (in-process, no Kafka)", task)]
    with broker(args.bootstrap) as bootstrap:
        topic = f"bench-sentences-{uuid.uuid4().hex[:8]}"
        asyncio.run(create_topics(bootstrap, [topic], PARTITIONS))
        ends = run_phase("produce", bootstrap, topic, n)["ends"]
        assert sum(ends.values()) == n, ends
        rows.append(("aiokafka passthrough (ceiling)", run_phase("passthrough", bootstrap, topic, ends, n_words)))
        rows.append(("daemon word count", run_phase("daemon", bootstrap, topic, ends, n_words)))
    base = rows[1][1]["elapsed"]
    print(f"{'phase':32} {'sentences/s':>12} {'words/s':>10} {'vs passthrough':>15} {'CPU us/sentence':>16} "
          f"{'peak RSS MB':>12}")
    for name, r in rows:
        ratio = f"{base / r['elapsed']:.2f}" if name.startswith("daemon") else "-"
        print(f"{name:32} {n / r['elapsed']:12,.0f} {n_words / r['elapsed']:10,.0f} {ratio:>15} "
              f"{1e6 * r['cpu'] / n:16.1f} {r['rss_mb']:12.1f}")


if __name__ == "__main__":
    main()
