"""The timer driven by a real event loop (stock asyncio and uvloop): one armed handle at a time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from streamproc.purgatory import Timer, TimerTask

# generous safety net against hangs; never a timing assertion
SAFETY_S = 10.0


def test_tasks_fire_in_due_order_with_one_handle(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        timer = Timer(wheel_size=4)  # small wheel: overflow levels + cascades under the loop
        timer.start()
        fired: list[tuple[int, int]] = []
        done = loop.create_future()
        delays = [30, 1, 17, 5, 5, 64, 2, 45]
        tasks = []

        def action(d: int, t_add: int) -> None:
            # the timer's clock reached t_add + delay (never early)
            fired.append((d, timer.now_ms - t_add))
            if len(fired) == len(delays) - 1:
                done.set_result(None)

        for d in delays:
            t = TimerTask(d, (lambda d=d, a=timer.now_ms: action(d, a)))
            timer.add(t)
            tasks.append(t)
            assert timer.armed_handles == 1
        tasks[0].cancel()  # the 30 ms one never runs
        await asyncio.wait_for(done, SAFETY_S)
        assert sorted(d for d, _ in fired) == sorted(delays[1:])
        for d, waited in fired:
            assert waited >= d
        assert len(timer) == 0
        # nothing pending: no handle stays armed (the cancelled task's bucket does not keep one)
        await asyncio.sleep(0.05)
        assert timer.armed_handles == 0
        assert loop.counter.max_live == 1
        assert loop.counter.live() == 0
        assert timer.arm_count == loop.counter.calls
        timer.stop()

    run_on_loop(main)


def test_handle_rearmed_only_when_earliest_bucket_changes(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        timer = Timer()
        async with timer:
            for _ in range(1000):
                timer.add(TimerTask(5_000))
            assert loop.counter.calls == 1  # all in one bucket: armed once
            timer.add(TimerTask(10_000))
            assert loop.counter.calls == 1  # later bucket: no re-arm
            timer.add(TimerTask(3_000))
            assert loop.counter.calls == 2  # earlier bucket: re-armed
            assert timer.armed_handles == 1 and loop.counter.live() == 1
            assert len(timer) == 1002
        # leaving the context stops the driver: no handle left on the loop
        assert timer.armed_handles == 0 and loop.counter.live() == 0
        assert len(timer) == 1002  # tasks stay pending (stop is not close)
        assert timer.close() == 1002

    run_on_loop(main)


def test_many_tasks_use_one_handle_at_a_time(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        timer = Timer(wheel_size=20)
        timer.start()
        count = 0
        done = loop.create_future()
        n = 3000

        def action() -> None:
            nonlocal count
            count += 1
            if count == n:
                done.set_result(None)

        previous = None
        for i in range(2 * n):
            t = TimerTask(1 + (i * 7) % 60, action)
            timer.add(t)
            if i % 2:
                t.cancel()
            elif previous is not None and previous.pending:
                timer.add(previous)  # re-add a pending task: moves it, still one entry
            previous = t
            if i % 500 == 0:
                await asyncio.sleep(0)
        await asyncio.wait_for(done, SAFETY_S)
        await asyncio.sleep(0.08)  # longer than any delay: nothing else may run
        assert count == n and len(timer) == 0
        assert loop.counter.max_live == 1
        assert timer.arm_count < n  # per bucket, not per task
        timer.stop()
        assert loop.counter.live() == 0

    run_on_loop(main)


def test_task_errors_go_to_the_loop_exception_handler(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen: list[BaseException] = []
        loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx["exception"]))
        timer = Timer()
        timer.start()
        ok = loop.create_future()

        def boom() -> None:
            raise ValueError("boom")

        timer.add(TimerTask(2, boom))
        timer.add(TimerTask(3, lambda: ok.set_result(True)))
        await asyncio.wait_for(ok, SAFETY_S)
        assert [str(e) for e in seen] == ["boom"]
        timer.stop()

    run_on_loop(main)


def test_start_on_second_loop_is_rejected_and_restart_continues_clock(run_on_loop: Any) -> None:
    async def main() -> None:
        timer = Timer(start_ms=1000)
        fired: list[int] = []
        timer.add(TimerTask(50, lambda: fired.append(timer.now_ms)))
        timer.advance_clock(1040)  # manual: 10 ms left
        timer.start()
        timer.start()  # same loop: no-op
        assert timer.now_ms >= 1040
        other = asyncio.new_event_loop()
        try:
            with pytest.raises(RuntimeError, match="another event loop"):
                timer.start(other)
        finally:
            other.close()
        for _ in range(200):
            if fired:
                break
            await asyncio.sleep(0.01)
        assert fired and fired[0] >= 1050
        timer.stop()
        assert timer.armed_handles == 0

    run_on_loop(main)
