"""Interactive queries next to processing, on one event loop (issue 23 part 5, docs/queries.md).

This process plays the daemon: one :class:`~streamproc.engine.task.Task` (partition 0 of the
benchmark topology) and a :class:`~streamproc.runtime.queries.QueryServer` on the same asyncio loop.
The processing loop runs ``Task.process`` over batches of raw records (bytes key, JSON value, as
aiokafka yields them), drains the outputs and the changelogs, and yields to the loop between batches
(``await asyncio.sleep(0)``), as the daemon does between batches. Queries come from a separate
process (aiohttp client, ``--concurrency`` requests in flight, random keys of the store), so the
client's own CPU is not charged to the daemon's loop.

Store: ``--store key_value`` (default): ``group_by_key().count()``, a key-value store of ``--keys``
keys (default 100k); ``--store session``: the sessions topology's session store (gap 30 min), the
same number of users, timestamps 1 ms apart so nothing expires during the run.

Phases, each ``--seconds`` long (default 5), in one run:

1. processing alone: records/s (wall clock, and per CPU second of this process);
2. queries alone (the loop idle): p50/p99 latency (ms, measured by the client), queries/s;
3. processing with concurrent queries: records/s (and the ratios to phase 1), and the queries'
   p50/p99 and queries/s. Its control: processing while another process burns a CPU without
   querying (the client's share of a shared machine), so the ratio to the control is the queries'
   own cost.

While the loop processes, a query waits for the batches that run between the steps of its request
(read, handle, write: each step waits for the batch then running), so its latency is a few batch
times; ``--batch`` trades that against processing overhead.

Usage: ``python -m benchmarks.bench_queries [--keys N] [--store key_value|session] [--seconds S]
[--concurrency C] [--batch B] [--loop uvloop|asyncio] [--quick]`` (uvloop by default, as the daemon).
Asserts nothing about speed; exits non-zero if a query got anything but 200 (every queried key
exists).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import random
import sys
import time
from typing import Any

from streamproc import serde
from streamproc.dsl import StreamsBuilder, Topology
from streamproc.engine.task import Task, TaskId
from streamproc.records import Record
from streamproc.runtime.queries import QueryServer, TaskOwners

APP = "bench-queries"
TOPIC = "events"
STORE = "counts"
SERVER = "127.0.0.1:0"


def counts_topology() -> Topology:
    b = StreamsBuilder()
    (b.stream(TOPIC, key_serde=serde.STRING, value_serde=serde.JSON).group_by_key().count(name=STORE)
     .to_stream().to("counts-out", key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


def sessions_topology() -> Topology:
    from topologies import sessions

    return sessions.build(input=TOPIC)


class OneTaskBackend:
    """The daemon as the query server sees it: one running task, partition 0 of one partition."""

    def __init__(self, topology: Topology, task: Task) -> None:
        self._topology = topology
        self.task = task

    @property
    def application_server(self) -> str:
        return SERVER

    @property
    def topology(self) -> Topology:
        return self._topology

    @property
    def application_id(self) -> str:
        return APP

    def task_partitions(self, subtopology: int) -> int | None:
        return 1

    def owners(self, task: TaskId) -> TaskOwners:
        return TaskOwners(SERVER, ())

    def local_task(self, task: TaskId) -> tuple[str, Task] | None:
        return ("running", self.task) if task == self.task.id else None


class Processor:
    """Feeds the task batches of raw records with random keys among ``keys``, timestamps 1 ms apart."""

    def __init__(self, task: Task, keys: list[str], batch: int, seed: int = 7) -> None:
        self.task = task
        self.keys = [k.encode() for k in keys]
        self.batch = batch
        self.rng = random.Random(seed)
        self.offset = 0
        self.value = json.dumps({"page": "/"}).encode()

    def run_batch(self, keys: list[bytes] | None = None) -> int:
        chosen = keys if keys is not None else self.rng.choices(self.keys, k=self.batch)
        records = []
        for key in chosen:
            records.append(Record(key, self.value, 1_000_000 + self.offset, (), TOPIC, 0, self.offset))
            self.offset += 1
        self.task.process(TOPIC, 0, records)
        self.task.drain_outputs()
        self.task.drain_changelogs()
        return len(records)

    async def run_for(self, seconds: float) -> tuple[float, float]:
        """Process for ``seconds``, yielding to the loop after each batch: ``(records per wall-clock
        second, records per CPU second of this process)`` (the second leaves out what other processes,
        the query client included, take from a shared machine; it includes the query server's work)."""
        done = 0
        start, cpu = time.perf_counter(), time.process_time()
        end = start + seconds
        while time.perf_counter() < end:
            done += self.run_batch()
            await asyncio.sleep(0)
        return done / (time.perf_counter() - start), done / max(1e-9, time.process_time() - cpu)


# ---- the query client (its own process) ---------------------------------------------------------------

def client_main(port: int, store: str, keys: list[str], seconds: float, concurrency: int, out: Any,
                go: Any) -> None:
    asyncio.run(_client(port, store, keys, seconds, concurrency, out, go))


async def _client(port: int, store: str, keys: list[str], seconds: float, concurrency: int, out: Any,
                  go: Any) -> None:
    import urllib.parse

    import aiohttp

    base = f"http://127.0.0.1:{port}/v1/stores/{store}/keys/"
    paths = [base + urllib.parse.quote(k, safe="") for k in keys]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.get(paths[0]) as r:        # warm a connection
            await r.read()
        out.put(("ready", None))
        go.wait()
        end = time.perf_counter() + seconds
        rng = random.Random(os.getpid())

        async def worker() -> None:
            while time.perf_counter() < end:
                url = paths[rng.randrange(len(paths))]
                t0 = time.perf_counter()
                async with session.get(url) as r:
                    await r.read()
                    statuses[r.status] = statuses.get(r.status, 0) + 1
                latencies.append(time.perf_counter() - t0)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    out.put(("done", {"latencies": latencies, "elapsed": elapsed, "statuses": statuses}))


def burn_main(seconds: float, out: Any, go: Any) -> None:
    """The control of phase 3: a process as busy as the query client, sending nothing."""
    out.put(("ready", None))
    go.wait()
    end = time.perf_counter() + seconds
    n = 0
    while time.perf_counter() < end:
        n += 1
    out.put(("done", {"latencies": [], "elapsed": seconds, "statuses": {}}))


async def busy_neighbour_during(seconds: float, work: Any) -> Any:
    """``await work`` while another process burns a CPU (the query client's share of a shared machine)."""
    ctx = mp.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=burn_main, args=(seconds, out, go), daemon=True)
    proc.start()
    while out.empty():
        await asyncio.sleep(0.01)
    out.get()
    go.set()
    result = await work
    proc.join(10)
    return result


async def queries_during(port: int, store: str, keys: list[str], seconds: float, concurrency: int,
                         work: Any = None) -> tuple[dict[str, Any], Any]:
    """Run the client process for ``seconds``; meanwhile ``await work`` (or keep the loop idle).
    Returns the client's figures and what ``work`` returned."""
    ctx = mp.get_context("spawn")
    out, go = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=client_main, args=(port, store, keys, seconds, concurrency, out, go), daemon=True)
    proc.start()
    while out.empty():                                 # the server must keep answering meanwhile
        await asyncio.sleep(0.01)
    assert out.get()[0] == "ready"
    go.set()
    cpu = time.process_time()
    result = None
    if work is not None:
        result = await work
    else:
        await asyncio.sleep(seconds)
    while out.empty():
        await asyncio.sleep(0.01)
    kind, figures = out.get()
    figures["server_cpu"] = time.process_time() - cpu
    proc.join(10)
    assert kind == "done"
    return figures, result


def summary(figures: dict[str, Any]) -> str:
    lat = sorted(figures["latencies"])
    if not lat:
        return "no queries answered"
    p50 = lat[len(lat) // 2] * 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
    qps = len(lat) / figures["elapsed"]
    return f"p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   {qps:8,.0f} queries/s   ({len(lat):,} queries)"


async def main_async(args: argparse.Namespace) -> int:
    topology = sessions_topology() if args.store == "session" else counts_topology()
    store = "session-clicks" if args.store == "session" else STORE
    task = Task(topology, 0, 0, APP)
    keys = [f"user-{i:07d}" for i in range(args.keys)]
    processor = Processor(task, keys, args.batch)
    t0 = time.perf_counter()
    for i in range(0, len(keys), 5_000):                # one record per key: the store holds every key
        processor.run_batch([k.encode() for k in keys[i:i + 5_000]])
    print(f"store {store!r} ({args.store}): {task.stores[store].approximate_num_entries:,} entries "
          f"after {time.perf_counter() - t0:.1f} s of pre-fill; batch {args.batch}, {args.seconds} s per phase, "
          f"{args.concurrency} queries in flight, {args.loop}; load average {os.getloadavg()[0]:.2f}")

    server = QueryServer(OneTaskBackend(topology, task), "127.0.0.1", 0)
    await server.start()
    try:
        alone, alone_cpu = await processor.run_for(args.seconds)
        print(f"1. processing alone:            {alone:10,.0f} records/s   ({alone_cpu:,.0f} per CPU second)")
        figures, _ = await queries_during(server.port, store, keys, args.seconds, args.concurrency)
        print(f"2. queries alone:               {summary(figures)}")
        per_query = figures["server_cpu"] / max(1, len(figures["latencies"]))
        print(f"   CPU of this process per query: {per_query * 1e6:,.0f} µs")
        bad = {s: n for s, n in figures["statuses"].items() if s != 200}
        busy, busy_cpu = await busy_neighbour_during(args.seconds, processor.run_for(args.seconds))
        print(f"   processing next to a busy process sending no queries (the control of 3): {busy:,.0f} records/s "
              f"({busy_cpu:,.0f} per CPU second; {busy / alone:.2f} and {busy_cpu / alone_cpu:.2f} of alone)")
        figures2, (with_queries, with_cpu) = await queries_during(
            server.port, store, keys, args.seconds, args.concurrency, processor.run_for(args.seconds))
        print(f"3. processing with queries:     {with_queries:10,.0f} records/s   ({with_cpu:,.0f} per CPU second; "
              f"{with_queries / alone:.2f} and {with_cpu / alone_cpu:.2f} of alone, "
              f"{with_queries / busy:.2f} and {with_cpu / busy_cpu:.2f} of the control)")
        print(f"   queries while processing:    {summary(figures2)}")
        bad.update({s: n for s, n in figures2["statuses"].items() if s != 200})
    finally:
        await server.stop()
    if bad:
        print(f"queries answered with other statuses than 200: {bad}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--store", choices=("key_value", "session"), default="key_value")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                        help="the event loop (the daemon's default is uvloop)")
    parser.add_argument("--quick", action="store_true", help="10k keys, 2 s phases")
    args = parser.parse_args(argv)
    if args.quick:
        args.keys, args.seconds = 10_000, 2.0
    if args.loop == "uvloop":
        import uvloop

        return uvloop.run(main_async(args))
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
