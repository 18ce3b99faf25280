"""Micro-benchmarks of the timer: insert+cancel pairs with N live timers, expiry drain, baselines.

Every figure is CPU time (``time.process_time``: robust to other processes sharing the machine),
best of ``repeat`` runs.
"""

from __future__ import annotations

import asyncio
import gc
import random
import time
from collections.abc import Callable
from typing import Any

from streamproc.purgatory import Timer, TimerTask


def _best(fn: Callable[[], float], repeat: int) -> float:
    return min(fn() for _ in range(repeat))


def wheel_pairs(wheel_size: int, live: int, pairs: int, delays: list[int], reuse: bool,
                ops_per_ms: int = 100, repeat: int = 3) -> float:
    """Seconds per insert+cancel pair: ``live`` timers pending; each pair cancels the oldest and
    inserts one (a new task, or the cancelled one again when ``reuse``). The clock advances 1 ms every
    ``ops_per_ms`` pairs (nothing expires: delays exceed the run's clock span... or expire normally)."""

    def run() -> float:
        timer = Timer(wheel_size=wheel_size)
        ring = [TimerTask(delays[i % len(delays)]) for i in range(live)]
        add = timer.add
        for t in ring:
            add(t)
        nd = len(delays)
        advance = timer.advance_clock
        now = 0
        gc.collect()
        t0 = time.process_time()
        i = 0
        for j in range(pairs):
            old = ring[i]
            old.cancel()
            if reuse:
                old.delay_ms = delays[j % nd]
                add(old)
            else:
                new = TimerTask(delays[j % nd])
                add(new)
                ring[i] = new
            i += 1
            if i == live:
                i = 0
            if j % ops_per_ms == 0:
                now += 1
                advance(now)
        elapsed = time.process_time() - t0
        timer.close()
        return elapsed / pairs

    return _best(run, repeat)


def wheel_drain(wheel_size: int, n: int, delays: list[int], repeat: int = 3) -> float:
    """Seconds per expiry: ``n`` tasks pending, the clock advanced 1 ms at a time until all ran."""

    def run() -> float:
        timer = Timer(wheel_size=wheel_size)
        add = timer.add
        nd = len(delays)
        for j in range(n):
            add(TimerTask(delays[j % nd]))
        end = max(delays)
        advance = timer.advance_clock
        gc.collect()
        t0 = time.process_time()
        for now in range(1, end + 1):
            advance(now)
        elapsed = time.process_time() - t0
        assert len(timer) == 0
        return elapsed / n

    return _best(run, repeat)


def loop_pairs(loop_factory: Callable[[], asyncio.AbstractEventLoop], live: int, pairs: int,
               delays: list[int], repeat: int = 3) -> float:
    """Baseline: ``loop.call_later`` + ``handle.cancel`` per pair, ``live`` handles pending; the loop
    runs one iteration every 1000 pairs (so asyncio can drop cancelled handles as it does when live)."""

    def run() -> float:
        async def main() -> float:
            loop = asyncio.get_running_loop()
            nd = len(delays)
            call_later = loop.call_later
            noop = int
            ring = [call_later(delays[i % nd] / 1000.0, noop) for i in range(live)]
            gc.collect()
            t0 = time.process_time()
            i = 0
            for j in range(pairs):
                ring[i].cancel()
                ring[i] = call_later(delays[j % nd] / 1000.0, noop)
                i += 1
                if i == live:
                    i = 0
                if j % 1000 == 0:
                    await asyncio.sleep(0)
            elapsed = time.process_time() - t0
            for h in ring:
                h.cancel()
            return elapsed / pairs

        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(main())

    return _best(run, repeat)


def delays_for(kind: str, count: int = 100_000, seed: int = 7) -> list[int]:
    rnd = random.Random(seed)
    if kind == "200ms":
        return [rnd.randint(1, 200) for _ in range(count)]
    if kind == "1-30s":
        return [rnd.randint(1_000, 30_000) for _ in range(count)]
    raise ValueError(f"unknown delay kind {kind!r}")


def run_micro(pairs: int, live: int, wheel_sizes: list[int], repeat: int, out: Any = print) -> dict[str, Any]:
    import uvloop

    results: dict[str, Any] = {"pairs": pairs, "live": live, "wheel": {}, "baseline": {}}
    out(f"\n## Micro-benchmark: insert+cancel pairs, {live:,} live timers, {pairs:,} pairs, best of {repeat}")
    out("   (clock advances 1 ms per 100 pairs; 'reuse' re-adds the cancelled task object, 'new' allocates"
        " a TimerTask per insert)")
    out(f"{'timer':<28}{'delays':>8}{'reuse ns/pair':>15}{'pairs/s':>12}{'new ns/pair':>14}{'pairs/s':>12}"
        f"{'drain ns/exp':>14}")
    for kind in ("200ms", "1-30s"):
        delays = delays_for(kind)
        for w in wheel_sizes:
            reuse = wheel_pairs(w, live, pairs, delays, True, repeat=repeat)
            new = wheel_pairs(w, live, pairs, delays, False, repeat=repeat)
            drain = wheel_drain(w, min(pairs, 200_000), delays, repeat=max(1, repeat - 1))
            results["wheel"][f"{w}/{kind}"] = {"reuse_s": reuse, "new_s": new, "drain_s": drain}
            out(f"{'wheel 1ms x ' + str(w):<28}{kind:>8}{reuse * 1e9:>15.0f}{1 / reuse:>12,.0f}"
                f"{new * 1e9:>14.0f}{1 / new:>12,.0f}{drain * 1e9:>14.0f}")
        for name, factory in (("asyncio call_later+cancel", asyncio.new_event_loop),
                              ("uvloop call_later+cancel", uvloop.new_event_loop)):
            base = loop_pairs(factory, live, pairs, delays, repeat=repeat)
            results["baseline"][f"{name}/{kind}"] = base
            out(f"{name:<28}{kind:>8}{'':>15}{'':>12}{base * 1e9:>14.0f}{1 / base:>12,.0f}")
    return results
