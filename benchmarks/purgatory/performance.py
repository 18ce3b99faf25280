"""Python/asyncio port of Kafka's TestPurgatoryPerformance (see docs/purgatory.md).

One run = one process (so peak RSS is per run): ``run_one(config) -> dict`` enqueues ``requests``
operations with exponential inter-arrival times at ``rate`` (open loop: never skips to catch up),
each completing after a log-normal latency (if below the timeout) or timing out after
``timeout_ms``; all watch the same ``keys`` keys (as in Kafka's benchmark) and nobody calls
``check_and_complete``, so only purges clean the watcher lists. Completions are driven by one
heap + one armed ``call_at`` (the "completion thread"), identical for every design.
"""

from __future__ import annotations

import asyncio
import gc
import heapq
import math
import resource
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from streamproc.purgatory import DelayedOperation, DelayedOperationPurgatory, Timer

from .old_design import OldPurgatory, make_old_operation_class

CASES = {"low": (20.0, 60.0), "high": (200.0, 400.0)}  # (pct50, pct75) of the latency in ms


class Latch:
    __slots__ = ("count", "future")

    def __init__(self, count: int, future: asyncio.Future) -> None:
        self.count = count
        self.future = future

    def count_down(self) -> None:
        self.count -= 1
        if self.count == 0:
            self.future.set_result(None)


class CompletionQueue:
    """Completes operations at their completion time: a heap plus ONE armed loop handle."""

    def __init__(self, loop: asyncio.AbstractEventLoop, now_ms: Callable[[], int]) -> None:
        self.loop = loop
        self.now_ms = now_ms
        self.heap: list[tuple[int, int, Any]] = []
        self.seq = 0
        self.armed_at = 1 << 62
        self.handle: Any = None

    def add(self, op: Any, at_ms: int) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (at_ms, self.seq, op))
        if at_ms < self.armed_at:
            self._arm(at_ms)

    def _arm(self, at_ms: int) -> None:
        if self.handle is not None:
            self.handle.cancel()
        self.armed_at = at_ms
        self.handle = self.loop.call_at(at_ms / 1000.0, self._run)

    def _run(self) -> None:
        self.handle = None
        self.armed_at = 1 << 62
        now = self.now_ms()
        heap = self.heap
        while heap and heap[0][0] <= now:
            heapq.heappop(heap)[2].force_complete()
        if heap:
            self._arm(heap[0][0])


def samples(requests: int, rate: float, case: str, seed: int) -> tuple[list[int], list[int]]:
    """Integer-ms arrival offsets (exponential inter-arrivals, residue carried) and latencies."""
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1000.0 / rate, size=requests)
    arrivals = np.floor(np.cumsum(gaps)).astype(np.int64)
    pct50, pct75 = CASES[case]
    mu = math.log(pct50)
    sigma = (math.log(pct75) - mu) / 0.674490
    lat = np.exp(rng.normal(mu, sigma, size=requests)).astype(np.int64)
    return arrivals.tolist(), lat.tolist()


_PAGE_MB = resource.getpagesize() / (1024.0 * 1024.0)


def rss_mb() -> float:
    """Current resident set size (Linux /proc), in MB."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE_MB


class RssSampler:
    """Peak of the current RSS, sampled by the generator every few thousand requests and by the
    completion of the run (ru_maxrss is useless here: sample generation peaks before the run)."""

    def __init__(self) -> None:
        self.base = rss_mb()
        self.peak = self.base

    def sample(self) -> None:
        now = rss_mb()
        self.peak = max(self.peak, now)


async def _run(config: dict[str, Any], arrivals: list[int], lats: list[int]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    loop_time = loop.time

    def now_ms() -> int:
        return int(loop_time() * 1000.0)

    requests = config["requests"]
    timeout = config["timeout_ms"]
    design = config["design"]
    done = loop.create_future()
    latch = Latch(requests, done)
    completion = CompletionQueue(loop, now_ms)
    keys = [f"fakeKey{i}" for i in range(config["keys"])]

    timer = None
    if design == "wheel":
        timer = Timer(tick_ms=1, wheel_size=config["wheel_size"])
        timer.start()
        purgatory: Any = DelayedOperationPurgatory("fake purgatory", timer, purge_interval=config["purge_interval"])

        class FakeOperation(DelayedOperation):
            __slots__ = ("completes_at",)

            def __init__(self, delay_ms: int, completes_at: int) -> None:
                super().__init__(delay_ms)
                self.completes_at = completes_at

            def try_complete(self) -> bool:
                return now_ms() >= self.completes_at and self.force_complete()

            def on_complete(self) -> None:
                latch.count_down()

            def on_expiration(self) -> None:
                pass

        make_op: Any = FakeOperation
    else:
        policy = "size" if design == "old" else "estimated"
        purgatory = OldPurgatory(loop, purge_interval=config["purge_interval"], policy=policy)
        make_op = make_old_operation_class(now_ms, latch)

    rss = RssSampler()
    gc0 = gc.get_stats()[0]["collections"]
    cpu0 = time.process_time()
    start = now_ms()
    submit = purgatory.try_complete_else_watch
    complete_add = completion.add
    sleep = asyncio.sleep
    deadline = start + int(config.get("max_seconds", 1e9) * 1000)
    enqueued = requests
    for i in range(requests):
        if i % 1000 == 0:
            rss.sample()
        if i % 1000 == 0 and now_ms() > deadline:
            enqueued = i  # capped: the rest is never submitted
            latch.count -= requests - i
            if latch.count == 0:
                done.set_result(None)
            break
        arrival = start + arrivals[i]
        now = now_ms()
        if arrival > now:
            await sleep((arrival - now) / 1000.0)
            now = now_ms()
        elif i % 100 == 0:
            await sleep(0)  # behind schedule: still let timers and completions run
        latency = lats[i]
        op = make_op(timeout, now + latency)
        if latency < timeout:
            complete_add(op, now + latency)
        submit(op, keys)
    end = now_ms()
    rss.sample()
    await done
    rss.sample()
    finish = now_ms()
    cpu = time.process_time() - cpu0
    gcs = gc.get_stats()[0]["collections"] - gc0
    arms = timer.arm_count if timer is not None else purgatory.arm_count
    purges = purgatory.purges
    purgatory.shutdown()
    target_span = max(arrivals[enqueued - 1], 1)
    return {
        "enqueued": enqueued,
        "capped": enqueued < requests,
        "target_rate": enqueued * 1000.0 / target_span,
        "achieved_rate": enqueued * 1000.0 / max(end - start, 1),
        "cpu_us_per_request": cpu * 1e6 / enqueued,
        "enqueue_s": (end - start) / 1000.0,
        "total_s": (finish - start) / 1000.0,
        "cpu_s": cpu,
        "gen0_gcs": gcs,
        "loop_arms": arms,
        "purges": purges,
        "base_rss_mb": rss.base,
        "peak_rss_mb": rss.peak,
    }


def run_one(config: dict[str, Any]) -> dict[str, Any]:
    """Run one configuration in this process and return its figures."""
    arrivals, lats = samples(config["requests"], config["rate"], config["case"], config.get("seed", 1))
    timed_out = sum(1 for x in lats if x >= config["timeout_ms"]) / len(lats)
    gc.collect()
    if config["loop"] == "uvloop":
        import uvloop

        factory: Any = uvloop.new_event_loop
    else:
        factory = asyncio.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        result = runner.run(_run(config, arrivals, lats))
    result.update(config)
    result["timeout_fraction"] = timed_out
    result["process_max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return result
