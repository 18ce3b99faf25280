"""AckTracker: committable offsets, delayed acks in the purgatory, delivery-timeout failures."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.errors import TaskFailedError
from streamproc.purgatory import AckTracker, DelayedOperationPurgatory, Timer


def tracker(timeout: int = 1000) -> tuple[AckTracker, Timer, list]:
    timer = Timer()
    failures: list = []
    purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory("acks", timer)
    t = AckTracker(purgatory, timeout, on_failure=lambda p, e: failures.append((p, e)))
    return t, timer, failures


def test_committable_offset_waits_for_the_lowest_unacked_offset() -> None:
    t, _, _ = tracker()
    assert t.committable_offset(0) is None
    t.begin(0, 10)
    assert t.committable_offset(0) == 11  # no sends: done as soon as begun
    t.begin(0, 11)
    t.add_send(0, future_or_count=2)  # two sends caused by offset 11
    t.begin(0, 12)
    t.begin(0, 15)  # gap: 13, 14 do not exist (compaction, markers)
    t.add_send(0, 15, 1)
    assert t.committable_offset(0) == 11
    t.send_acked(0, 15)  # later offset acked first: does not pass the gap
    assert t.committable_offset(0) == 11
    t.send_acked(0, 11)
    assert t.committable_offset(0) == 11
    t.send_acked(0, 11)
    assert t.committable_offset(0) == 16
    assert t.pending_sends(0) == 0


def test_one_delayed_ack_per_partition_completes_when_its_offsets_are_acked() -> None:
    t, timer, failures = tracker()
    t.begin("p", 0)
    t.add_send("p", 0, 1)
    first = t.delayed_ack("p")
    assert first is not None and first.upto == 0 and len(timer) == 1
    t.begin("p", 1)
    t.add_send("p", 1, 1)
    assert t.delayed_ack("p") is first and len(timer) == 1  # still one op
    t.send_acked("p", 0)
    assert first.completed and not first.expired
    second = t.delayed_ack("p")  # re-armed for the newest pending offset
    assert second is not None and second is not first and second.upto == 1
    assert len(timer) == 1
    t.send_acked("p", 1)
    assert second.completed and t.delayed_ack("p") is None and len(timer) == 0
    timer.advance_clock(10_000)
    assert failures == []


def test_delivery_timeout_fails_the_partition_once() -> None:
    t, timer, failures = tracker(timeout=500)
    t.begin(3, 7)
    t.add_send(3, 7, 1)
    t.begin(4, 1)
    t.add_send(4, 1, 1)
    timer.advance_clock(499)
    t.send_acked(4, 1)
    assert failures == []
    timer.advance_clock(500)
    assert [p for p, _ in failures] == [3]
    assert isinstance(failures[0][1], TaskFailedError) and "500 ms" in str(failures[0][1])
    assert t.failure(3) is failures[0][1] and t.failed_partitions == [3]
    assert t.committable_offset(3) == 7  # never past the unacked offset
    t.begin(3, 8)
    t.add_send(3, 8, 1)  # failed partition: tracked, but no new op, no second failure
    timer.advance_clock(5_000)
    assert len(failures) == 1 and t.delayed_ack(3) is None


def test_send_futures_ack_and_fail(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        failures: list = []
        timer = Timer()
        timer.start()
        t = AckTracker(DelayedOperationPurgatory("acks", timer), 60_000,
                       on_failure=lambda p, e: failures.append((p, e)))
        ok = [loop.create_future() for _ in range(3)]
        t.begin(0, 100)
        for f in ok[:2]:
            t.add_send(0, future_or_count=f)
        t.begin(0, 101)
        t.add_send(0, future_or_count=ok[2])
        assert t.committable_offset(0) == 100
        ok[2].set_result("meta")
        ok[0].set_result("meta")
        await asyncio.sleep(0)
        assert t.committable_offset(0) == 100
        ok[1].set_result("meta")
        await asyncio.sleep(0)
        assert t.committable_offset(0) == 102
        # cancels never touch the loop: the handle armed for the now-empty bucket stays until it
        # fires (then finds nothing); still at most one
        assert len(timer) == 0 and timer.armed_handles <= 1
        bad = loop.create_future()
        t.begin(1, 5)
        t.add_send(1, 5, bad)
        bad.set_exception(OSError("broker gone"))
        await asyncio.sleep(0)
        assert [p for p, _ in failures] == [1]
        assert isinstance(failures[0][1].__cause__, OSError)
        assert t.committable_offset(1) == 5
        t.close()
        late = loop.create_future()
        t.begin(2, 1)
        t.add_send(2, 1, late)
        t.close_partition(2)
        late.set_result("meta")  # acks of a closed partition are ignored
        await asyncio.sleep(0)
        assert t.partitions == [] and len(timer) == 0
        timer.stop()
        assert loop.counter.live() == 0 and loop.counter.max_live == 1

    run_on_loop(main)


def test_delivery_timeout_on_the_loop(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        failed = loop.create_future()
        timer = Timer()
        timer.start()
        t = AckTracker(DelayedOperationPurgatory("acks", timer), 20,
                       on_failure=lambda p, e: failed.set_result((p, e)))
        t.begin("tp", 0)
        t.add_send("tp", 0, 1)
        partition, error = await asyncio.wait_for(failed, 10)
        assert partition == "tp" and isinstance(error, TaskFailedError)
        assert timer.armed_handles == 0 and loop.counter.max_live == 1
        timer.stop()

    run_on_loop(main)


def test_bad_calls_name_the_offending_values() -> None:
    t, _, _ = tracker()
    with pytest.raises(ValueError, match="no input offset was begun"):
        t.add_send(0, 1, 1)
    t.begin(0, 5)
    with pytest.raises(ValueError, match="strictly"):
        t.begin(0, 5)
    with pytest.raises(ValueError, match="strictly"):
        t.begin(0, -1)
    with pytest.raises(ValueError, match="after the last begun offset 5"):
        t.add_send(0, 6, 1)
    with pytest.raises(ValueError, match="only 0 send"):
        t.send_acked(0, 5)
    with pytest.raises(TypeError, match="int count or a future"):
        t.add_send(0, 5, "x")
    assert t.committable_offset(0) == 6
    with pytest.raises(ValueError, match="below committable offset 6"):
        t.add_send(0, 5, 1)
    with pytest.raises(ValueError, match="delivery_timeout_ms"):
        AckTracker(None, 0)


class BruteForce:
    """Reference: pending count per begun offset; committable = min pending offset else last + 1."""

    def __init__(self) -> None:
        self.begun: list[int] = []
        self.pending: dict[int, int] = {}
        self.floor: int | None = None

    def committable(self) -> int | None:
        if not self.begun:
            return None
        waiting = [o for o, n in self.pending.items() if n > 0]
        value = min(waiting) if waiting else self.begun[-1] + 1
        self.floor = value
        return value

    def can_send(self, offset: int) -> bool:
        if not self.begun or offset > self.begun[-1]:
            return False
        low = self.begun[0] if self.floor is None else self.floor
        return self.pending.get(offset, 0) > 0 or offset >= low


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["begin", "send", "ack", "commit"]),
                          st.integers(0, 4), st.integers(1, 3)), max_size=150))
def test_committable_offset_matches_brute_force(script: list) -> None:
    t, _, _ = tracker(timeout=10**9)
    ref = BruteForce()
    next_offset = 0
    for action, a, b in script:
        if action == "begin":
            next_offset += a  # gaps of 0..4 missing offsets
            t.begin("p", next_offset)
            ref.begun.append(next_offset)
            next_offset += 1
        elif action == "send":
            if not ref.begun:
                continue
            offset = ref.begun[-1] - a  # the newest or a slightly older offset (maybe a gap offset)
            if ref.can_send(offset):
                t.add_send("p", offset, b)
                ref.pending[offset] = ref.pending.get(offset, 0) + b
            else:
                with pytest.raises(ValueError):
                    t.add_send("p", offset, b)
        elif action == "ack":
            waiting = sorted(o for o, n in ref.pending.items() if n > 0)
            if not waiting:
                continue
            offset = waiting[a % len(waiting)]  # acks arrive in any order
            n = min(b, ref.pending[offset])
            t.send_acked("p", offset, n)
            ref.pending[offset] -= n
        else:
            assert t.committable_offset("p") == ref.committable()
        assert t.pending_sends("p") == sum(ref.pending.values())
        op = t.delayed_ack("p")
        # a delayed ack is pending exactly when sends are pending
        assert (op is not None) == (sum(ref.pending.values()) > 0)
    assert t.committable_offset("p") == ref.committable()
