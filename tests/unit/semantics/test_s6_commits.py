"""docs/semantics.md, "Commits and delayed acks": commits and delayed acks (the broker-less parts).

- The committable offset of a partition is the lowest un-acknowledged input offset, never past a gap
  (``AckTracker``, against a brute-force model).
- Pending acks are delayed operations in the timing-wheel purgatory; one that times out fails the
  partition (its task). The purgatory and timer rules of docs/purgatory.md are checked against models too.
- A record's changelog sends hold its offset back until acknowledged (``register_changelog_flush``).

The commit order against a real broker, and exactly-once, are covered by tests/integration.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamproc import Config, ConfigError
from streamproc.purgatory import AckTracker, DelayedOperation, DelayedOperationPurgatory, Timer, TimerTask
from streamproc.runtime.acks import register_batch, register_changelog_flush

# -- committable offset ---------------------------------------------------------------------------


class AckModel:
    def __init__(self) -> None:
        self.last = -1
        self.pending: dict[int, int] = {}
        self.floor = -1

    def committable(self) -> int | None:
        if self.last < 0:
            return None
        lows = [o for o, n in self.pending.items() if n > 0]
        c = min(lows) if lows else self.last + 1
        self.floor = c
        return c


OPS = st.lists(st.tuples(st.sampled_from(["begin", "send", "ack", "query"]), st.integers(0, 1000),
                         st.integers(1, 3)), max_size=80)


@given(OPS)
def test_committable_offset_is_lowest_unacknowledged(ops: list[tuple]) -> None:
    tracker = AckTracker(DelayedOperationPurgatory("acks", Timer()), delivery_timeout_ms=1_000_000)
    model = AckModel()
    seen: list[int] = []
    for name, pick, n in ops:
        if name == "begin":
            offset = model.last + n  # gaps allowed
            tracker.begin("p", offset)
            if model.last < 0:
                model.floor = offset  # nothing below the first offset begun can get sends
            model.last = offset
        elif name == "send" and model.last >= 0 and model.floor <= model.last:
            # sends attach to begun offsets not below the last committable offset handed out
            candidates = list(range(model.floor, model.last + 1))
            offset = candidates[pick % len(candidates)]
            tracker.add_send("p", offset, n)
            model.pending[offset] = model.pending.get(offset, 0) + n
        elif name == "ack":
            open_ = sorted(o for o, c in model.pending.items() if c > 0)
            if open_:
                offset = open_[pick % len(open_)]
                tracker.send_acked("p", offset)
                model.pending[offset] -= 1
        else:
            got = tracker.committable_offset("p")
            assert got == model.committable()
            if got is not None:
                seen.append(got)
        assert tracker.pending_sends("p") == sum(model.pending.values())
    assert seen == sorted(seen)  # never decreases
    assert tracker.failed_partitions == []


def test_never_past_a_gap() -> None:
    tracker = AckTracker(DelayedOperationPurgatory("acks", Timer()), delivery_timeout_ms=1000)
    for off in range(5):
        tracker.begin("p", off)
        tracker.add_send("p", off, 1)
    assert tracker.committable_offset("p") == 0
    for off in (4, 3, 1):
        tracker.send_acked("p", off)
    assert tracker.committable_offset("p") == 0  # 0 still pending: nothing above it is committable
    tracker.send_acked("p", 0)
    assert tracker.committable_offset("p") == 2
    tracker.send_acked("p", 2)
    assert tracker.committable_offset("p") == 5
    assert tracker.committable_offset("q") is None


# -- timeouts fail the partition ------------------------------------------------------------------


def test_delayed_ack_timeout_fails_the_partition_once() -> None:
    timer = Timer()
    failures: list[tuple[Any, BaseException]] = []
    tracker = AckTracker(DelayedOperationPurgatory("acks", timer), delivery_timeout_ms=100,
                         on_failure=lambda p, e: failures.append((p, e)))
    tracker.begin("p", 0)
    tracker.add_send("p", 0, 1)
    tracker.begin("p", 1)
    tracker.begin("q", 0)
    tracker.add_send("q", 0, 1)
    timer.advance_clock(50)
    tracker.send_acked("q", 0)
    timer.advance_clock(99)
    assert failures == [] and tracker.failure("p") is None
    timer.advance_clock(250)  # well past the delivery timeout
    assert [p for p, _ in failures] == ["p"]
    assert tracker.failure("p") is not None and tracker.failure("q") is None
    assert tracker.committable_offset("p") == 0  # the un-acknowledged offset is never passed
    assert tracker.committable_offset("q") == 1
    timer.advance_clock(10_000)
    assert len(failures) == 1


async def test_send_futures_ack_or_fail() -> None:
    loop = asyncio.get_running_loop()
    failures: list[Any] = []
    tracker = AckTracker(DelayedOperationPurgatory("acks", Timer()), delivery_timeout_ms=60_000,
                         on_failure=lambda p, e: failures.append(p))
    ok, bad = loop.create_future(), loop.create_future()
    tracker.begin("p", 0)
    tracker.add_send("p", 0, ok)
    tracker.begin("q", 7)
    tracker.add_send("q", 7, bad)
    ok.set_result(None)
    bad.set_exception(RuntimeError("broker said no"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert tracker.committable_offset("p") == 1
    assert failures == ["q"] and tracker.committable_offset("q") == 7


async def test_changelog_sends_hold_back_the_offsets_they_carry() -> None:
    """An input record is acknowledged only when its outputs *and* changelog records are. Each
    commit follows §6's order: flush the changelogs (registering their sends), wait, then read the
    committable offset."""
    loop = asyncio.get_running_loop()
    tracker = AckTracker(DelayedOperationPurgatory("acks", Timer()), delivery_timeout_ms=60_000)
    unflushed: dict[Hashable, int] = {}

    def commit(changelog_sends: list[Any]) -> int | None:
        register_changelog_flush(tracker, ["p"], changelog_sends, unflushed)
        return tracker.committable_offset("p")

    out1, out2 = loop.create_future(), loop.create_future()
    register_batch(tracker, {"p": 0}, {"p": 4}, [(out1, ["p"])], unflushed)
    register_batch(tracker, {"p": 5}, {"p": 9}, [(out2, ["p"])], unflushed)
    out1.set_result(None)
    out2.set_result(None)
    await asyncio.sleep(0)
    changelog = loop.create_future()
    assert commit([changelog]) == 0  # the changelog of offsets 0..9 is not acknowledged yet
    changelog.set_result(None)
    await asyncio.sleep(0)
    assert commit([]) == 10
    out3 = loop.create_future()
    register_batch(tracker, {"p": 10}, {"p": 12}, [(out3, ["p"])], unflushed)
    out3.set_result(None)
    await asyncio.sleep(0)
    cl2 = loop.create_future()
    assert commit([cl2]) == 10  # outputs of 10..12 are acknowledged, their state changes are not
    cl2.set_result(None)
    await asyncio.sleep(0)
    assert commit([]) == 13
    out4 = loop.create_future()
    register_batch(tracker, {"p": 13}, {"p": 13}, [(out4, ["p"])], unflushed)
    assert commit([]) == 13  # an output not acknowledged holds its offset back
    out4.set_result(None)
    await asyncio.sleep(0)
    assert commit([]) == 14


def test_processing_guarantees() -> None:
    assert Config(application_id="a", bootstrap_servers="b:1").processing_guarantee == "at_least_once"
    assert Config(application_id="a", bootstrap_servers="b:1",
                  processing_guarantee="exactly_once_v2").processing_guarantee == "exactly_once_v2"
    with pytest.raises(ConfigError):
        Config(application_id="a", bootstrap_servers="b:1", processing_guarantee="exactly_once")


# -- the timing wheel (docs/purgatory.md) against a model -------------------------------------------------

TIMER_OPS = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(0, 300)),  # negative delays are a ValueError (docs/semantics.md, "Time and stream time")
    st.tuples(st.just("cancel"), st.integers(0, 1000)),
    st.tuples(st.just("advance"), st.integers(0, 400)),
), max_size=60)


@given(st.integers(0, 50), st.integers(2, 8), TIMER_OPS)
def test_timer_runs_each_task_once_when_due(start: int, wheel: int, ops: list[tuple]) -> None:
    """``TimerTask(delay)`` runs once, when the clock reaches ``t_add + delay`` (``t_add``: the last
    ``advance_clock`` value or ``start_ms``); ``cancel()`` before that means it never runs;
    ``len(timer)`` is the number of pending tasks."""
    timer = Timer(tick_ms=1, wheel_size=wheel, start_ms=start)
    now = start
    due: dict[int, int] = {}  # task id -> due time (pending)
    tasks: list[TimerTask] = []
    ran: list[tuple[int, int]] = []
    for name, x in ops:
        if name == "add":
            i = len(tasks)
            task = TimerTask(x, action=lambda i=i: ran.append((i, timer.now_ms)))  # type: ignore[misc]
            tasks.append(task)
            timer.add(task)
            if x > 0:
                due[i] = now + x
            else:
                assert ran[-1][0] == i  # due at once: runs inside add
        elif name == "cancel" and tasks:
            i = x % len(tasks)
            tasks[i].cancel()
            due.pop(i, None)
        elif name == "advance":
            before = len(ran)
            now += x
            expired = timer.advance_clock(now)
            fired = {i for i, _ in ran[before:]}
            assert fired == {i for i, t in due.items() if t <= now}
            assert expired == len(fired)
            for i in fired:
                del due[i]
        assert len(timer) == len(due)
    assert len({i for i, _ in ran}) == len(ran)  # each at most once


class Op(DelayedOperation):
    def __init__(self, delay: int, ready: set[str], name: str, log: list[tuple[str, str]]) -> None:
        super().__init__(delay)
        self.ready = ready
        self.name = name
        self.log = log

    def try_complete(self) -> bool:
        if self.name in self.ready:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.log.append(("complete", self.name))

    def on_expiration(self) -> None:
        self.log.append(("expire", self.name))


def test_delayed_operation_completes_exactly_once() -> None:
    timer = Timer()
    purg: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("p", timer)
    log: list[tuple[str, str]] = []
    ready: set[str] = set()
    now_ready = Op(100, {"a"}, "a", log)
    assert purg.try_complete_else_watch(now_ready, ["k"]) is True
    assert now_ready.force_complete() is False
    b, c = Op(100, ready, "b", log), Op(100, ready, "c", log)
    assert purg.try_complete_else_watch(b, ["k1", "k2"]) is False
    assert purg.try_complete_else_watch(c, ["k2"]) is False
    assert purg.num_delayed == 2
    ready.add("b")
    assert purg.check_and_complete("k2") == 1
    assert purg.check_and_complete("k1") == 0  # already completed through k2
    timer.advance_clock(100)
    assert log == [("complete", "a"), ("complete", "b"), ("complete", "c"), ("expire", "c")]
    assert b.force_complete() is False and c.force_complete() is False
    assert purg.num_delayed == 0


@given(st.lists(st.tuples(st.sampled_from(["watch", "ready", "check", "advance"]), st.integers(0, 5),
                          st.integers(1, 50)), max_size=50))
def test_purgatory_matches_model(ops: list[tuple]) -> None:
    """Every operation ends exactly once: completed by a check of one of its keys when ready, or
    expired when the clock reaches its submission time + delay; never both."""
    timer = Timer()
    purg: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("p", timer, purge_interval=3)
    log: list[tuple[str, str]] = []
    ready: set[str] = set()
    now = 0
    pending: dict[str, tuple[int, set[int]]] = {}  # name -> (deadline, keys)
    for n, (name, a, b) in enumerate(ops):
        if name == "watch":
            op_name = f"op{n}"
            keys = {a, (a + b) % 6}
            if op_name in ready:
                continue
            assert purg.try_complete_else_watch(Op(b, ready, op_name, log), sorted(keys)) is False
            pending[op_name] = (now + b, keys)
        elif name == "ready" and pending:
            ready.add(sorted(pending)[a % len(pending)])
        elif name == "check":
            expected = sorted(o for o, (_, keys) in pending.items() if o in ready and a in keys)
            before = len(log)
            assert purg.check_and_complete(a) == len(expected)
            assert sorted(x for _, x in log[before:]) == expected
            for o in expected:
                del pending[o]
        else:
            now += b
            before = len(log)
            timer.advance_clock(now)
            expired = sorted(o for o, (t, _) in pending.items() if t <= now)
            assert sorted(x for kind, x in log[before:] if kind == "expire") == expired
            assert sorted(x for kind, x in log[before:] if kind == "complete") == expired
            for o in expired:
                del pending[o]
        assert purg.num_delayed == len(pending)
    names = [x for kind, x in log if kind == "complete"]
    assert len(names) == len(set(names))
