"""The documented public node fields of timer tasks and buckets (``prev_node``, ``next_node``,
``timer_bucket``, ``due_tick``; docs/purgatory.md) and ``AckTracker.fail_partition``."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.errors import TaskFailedError
from streamproc.purgatory import AckTracker, DelayedOperationPurgatory, Timer, TimerTask
from streamproc.purgatory.task import TimerTaskList


def chain(bucket: TimerTaskList) -> list[Any]:
    """The bucket's list walked forwards, checking every backward link on the way."""
    out = []
    node = bucket.next_node
    prev: Any = bucket
    while node is not bucket:
        assert node is not None and node.prev_node is prev
        out.append(node)
        prev, node = node, node.next_node
    assert bucket.prev_node is prev
    return out


def test_a_pending_task_sits_in_its_bucket_between_its_links() -> None:
    timer = Timer(tick_ms=1, wheel_size=8)
    a, b = TimerTask(5), TimerTask(5)
    assert a.timer_bucket is None and not a.pending
    timer.add(a)
    timer.add(b)
    bucket = a.timer_bucket
    assert isinstance(bucket, TimerTaskList) and b.timer_bucket is bucket
    assert chain(bucket) == [a, b] == bucket.tasks()
    assert a.due_tick == 5 and a.pending
    assert a.cancel()
    assert (a.prev_node, a.next_node, a.timer_bucket) == (None, None, None)
    assert chain(bucket) == [b]
    timer.advance_clock(5)
    assert (b.prev_node, b.next_node, b.timer_bucket) == (None, None, None)
    assert bucket.empty and bucket.next_node is bucket and bucket.prev_node is bucket


def test_due_tick_rounds_up_to_the_tick() -> None:
    timer = Timer(tick_ms=10, wheel_size=8)
    t = TimerTask(25)
    timer.add(t)
    assert t.due_tick == 3 and t.expiration_ms == 25


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3000), st.booleans()), min_size=1, max_size=60), st.integers(0, 4000))
def test_links_stay_consistent_across_add_cancel_and_advance(ops: list[tuple[int, bool]], now: int) -> None:
    timer = Timer(tick_ms=1, wheel_size=4)     # small wheels: overflow levels and cascades
    tasks = []
    for delay, cancel in ops:
        t = TimerTask(delay)
        timer.add(t)
        tasks.append(t)
        if cancel:
            t.cancel()
    timer.advance_clock(now)
    pending = [t for t in tasks if t.timer_bucket is not None]
    assert len(pending) == len(timer)
    for t in tasks:
        if t.timer_bucket is None:
            assert t.prev_node is None and t.next_node is None
        else:
            assert t in chain(t.timer_bucket)
            assert t.expiration_ms > now


def test_fail_partition_keeps_the_first_failure_and_stops_the_timeout() -> None:
    timer = Timer()
    failures: list[Any] = []
    purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory("acks", timer)
    tracker = AckTracker(purgatory, 1000, on_failure=lambda p, e: failures.append((p, e)))
    tracker.begin(0, 10)
    tracker.add_send(0, future_or_count=1)
    assert len(timer) == 1                     # the delayed ack's delivery timeout
    op = tracker.delayed_ack(0)
    assert op is not None
    state = op.state
    first, second = TaskFailedError("first"), TaskFailedError("second")
    tracker.fail_partition(state, first)
    tracker.fail_partition(state, second)
    assert failures == [(0, first)] and tracker.failure(0) is first
    assert len(timer) == 0                     # its timeout no longer pending
    assert tracker.committable_offset(0) == 10  # never past the failed send
