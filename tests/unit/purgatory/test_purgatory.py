"""DelayedOperation and DelayedOperationPurgatory: watch, complete, expire, purge, exactly-once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.purgatory import DelayedOperation, DelayedOperationPurgatory, Timer


class Op(DelayedOperation):
    """Completes when ``ready`` is set; records every callback."""

    def __init__(self, delay_ms: int, name: str = "op", log: list | None = None) -> None:
        super().__init__(delay_ms)
        self.name = name
        self.ready = False
        self.log = log if log is not None else []
        self.tries = 0

    def try_complete(self) -> bool:
        self.tries += 1
        return self.ready and self.force_complete()

    def on_complete(self) -> None:
        self.log.append((self.name, "complete", self.expired))

    def on_expiration(self) -> None:
        self.log.append((self.name, "expire"))


def test_watch_then_complete_by_key() -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer(), purge_interval=1000)
    a, b = Op(100, "a"), Op(100, "b")
    assert p.try_complete_else_watch(a, ["k1", "k2"]) is False
    assert p.try_complete_else_watch(b, ["k2"]) is False
    assert a.tries == 2  # tried before and after watching
    assert p.num_delayed == 2 and p.watched == 3 and p.estimated_total == 2
    assert p.check_and_complete("k1") == 0
    a.ready = True
    assert p.check_and_complete("k1") == 1
    assert a.completed and not a.pending and a.log == [("a", "complete", False)]
    assert p.num_delayed == 1  # unlinked from the timer at once
    assert p.watched == 2  # a still in k2's list until k2 is checked or purged
    assert p.check_and_complete("k2") == 0  # drops completed a, b not ready
    assert p.watched == 1 and p.watchers_for("k2") == [b]
    assert p.check_and_complete("missing") == 0


def test_completes_immediately_without_watching() -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer())
    op = Op(100)
    op.ready = True
    assert p.try_complete_else_watch(op, ["k"]) is True
    assert p.watched == 0 and p.num_delayed == 0 and p.estimated_total == 0


def test_second_try_after_watching_catches_a_concurrent_event() -> None:
    class Flips(Op):
        def try_complete(self) -> bool:
            self.tries += 1
            return self.tries >= 2 and self.force_complete()

    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer())
    op = Flips(100)
    assert p.try_complete_else_watch(op, ["k1", "k2"]) is True
    assert p.num_delayed == 0 and not op.pending  # timeout never armed
    assert p.watched == 2 and p.estimated_total == 1  # watched before the second try


def test_expiry_runs_on_complete_then_on_expiration_exactly_once() -> None:
    timer = Timer()
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    log: list = []
    a, b = Op(10, "a", log), Op(10, "b", log)
    p.try_complete_else_watch(a, ["k"])
    p.try_complete_else_watch(b, ["k"])
    b.ready = True
    assert p.check_and_complete("k") == 1
    assert timer.advance_clock(10) == 1
    assert log == [("b", "complete", False), ("a", "complete", True), ("a", "expire")]
    assert a.expired and not b.expired
    # nothing completes twice afterwards
    a.ready = True
    assert a.force_complete() is False and b.force_complete() is False
    assert p.check_and_complete("k") == 0
    timer.advance_clock(100)
    assert len(log) == 3 and p.watched == 0


def test_force_complete_is_true_exactly_once_when_reentrant() -> None:
    results: list = []

    class Reentrant(Op):
        def on_complete(self) -> None:
            super().on_complete()
            results.append(self.force_complete())  # re-entrant: must be False

    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer())
    op = Reentrant(5, "r")
    p.try_complete_else_watch(op, ["k"])
    op.ready = True
    assert p.check_and_complete("k") == 1
    assert results == [False] and op.log == [("r", "complete", False)]
    assert op.force_complete() is False


@pytest.mark.parametrize("completer_first", [True, False])
def test_completion_and_expiry_racing_in_the_same_millisecond(completer_first: bool) -> None:
    """Two operations due in the same bucket; the first to run tries to complete the other."""
    timer = Timer()
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    results: list = []
    target = Op(5, "target")

    class Completer(Op):
        def on_complete(self) -> None:
            super().on_complete()
            results.append(target.force_complete())

    completer = Completer(5, "completer")
    order = [completer, target] if completer_first else [target, completer]
    for op in order:
        p.try_complete_else_watch(op, [op.name])
    ran = timer.advance_clock(5)
    if completer_first:
        # completed by the completer before its own expiry ran: no expiration callback
        assert results == [True] and ran == 1
        assert target.log == [("target", "complete", False)] and not target.expired
    else:
        assert results == [False] and ran == 2
        assert target.log == [("target", "complete", True), ("target", "expire")]
    assert p.num_delayed == 0


def test_purge_is_triggered_by_the_estimated_count() -> None:
    timer = Timer()
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer, purge_interval=10)
    ops = [Op(1_000, f"o{i}") for i in range(30)]
    for op in ops:
        p.try_complete_else_watch(op, ["x", "y"])
    assert p.watched == 60 and p.num_delayed == 30 and p.estimated_total == 30
    # complete 10 directly (not through a key check): E - num_delayed = 10, not > 10
    for op in ops[:10]:
        assert op.force_complete()
    timer.advance_clock(1)
    assert p.purges == 0 and p.watched == 60
    ops[10].force_complete()  # 11 > 10: the next check purges
    timer.advance_clock(2)
    assert p.purges == 1 and p.purged_entries == 22
    assert p.watched == 38 and p.estimated_total == p.num_delayed == 19
    # a watch also runs the check
    for op in ops[11:23]:
        op.force_complete()
    assert p.purges == 1
    p.try_complete_else_watch(Op(1_000, "new"), ["x"])  # E = 20, num_delayed = 8: 12 > 10
    assert p.purges == 2 and p.watched == 2 * 7 + 1
    assert p.estimated_total == 8  # reset to num_delayed before the scan (the new op was counted in it)


def test_size_alone_does_not_trigger_a_purge() -> None:
    timer = Timer()
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer, purge_interval=10)
    for i in range(500):
        p.try_complete_else_watch(Op(1_000, str(i)), ["a", "b", "c"])
    timer.advance_clock(5)
    assert p.watched == 1500 and p.purges == 0  # all pending: nothing to purge, no scan


def test_reentrant_submit_on_the_same_key_during_check_stays_watched() -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer())
    follow = Op(100, "follow")

    class Chains(Op):
        def on_complete(self) -> None:
            super().on_complete()
            p.try_complete_else_watch(follow, ["k"])

    first = Chains(100, "first")
    p.try_complete_else_watch(first, ["k"])
    first.ready = True
    assert p.check_and_complete("k") == 1
    assert p.watchers_for("k") == [follow] and p.watched == 1
    follow.ready = True
    assert p.check_and_complete("k") == 1 and p.watched == 0


def test_cancel_for_key_and_errors() -> None:
    timer = Timer()
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
    a = Op(10, "a")
    p.try_complete_else_watch(a, ["k"])
    with pytest.raises(ValueError, match="already submitted"):
        p.try_complete_else_watch(a, ["k"])
    with pytest.raises(ValueError, match="at least one watch key"):
        p.try_complete_else_watch(Op(10), [])
    assert p.cancel_for_key("k") == [a]
    assert not a.completed and not a.pending and p.num_delayed == 0 and p.watched == 0
    timer.advance_clock(100)
    assert a.log == []
    with pytest.raises(ValueError, match="purge_interval"):
        DelayedOperationPurgatory("t", timer, purge_interval=-1)
    with pytest.raises(ValueError, match="name"):
        DelayedOperationPurgatory("", timer)


def test_zero_delay_operation_expires_inside_submit() -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer())
    op = Op(0, "z")
    assert p.try_complete_else_watch(op, ["k"]) is False
    assert op.expired and op.log == [("z", "complete", True), ("z", "expire")]
    assert p.num_delayed == 0


def test_exception_in_try_complete_keeps_lists_consistent() -> None:
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", Timer())

    class Bad(Op):
        def try_complete(self) -> bool:
            if self.ready:
                raise RuntimeError("bad check")
            return False

    ops = [Op(10, "a"), Bad(10, "bad"), Op(10, "c")]
    for op in ops:
        p.try_complete_else_watch(op, ["k"])
    ops[0].ready = ops[1].ready = True
    with pytest.raises(RuntimeError, match="bad check"):
        p.check_and_complete("k")
    assert p.watchers_for("k") == ops[1:] and p.watched == 2


def test_shutdown_leaves_no_pending_and_no_armed_handle(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        timer = Timer()
        timer.start()
        p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer)
        log: list = []
        ops = [Op(50 + i, str(i), log) for i in range(100)]
        for op in ops:
            p.try_complete_else_watch(op, [op.name, "all"])
        assert timer.armed_handles == 1
        p.shutdown()
        assert timer.armed_handles == 0 and loop.counter.live() == 0
        assert len(timer) == 0 and p.watched == 0
        await asyncio.sleep(0.2)
        assert log == []  # neither completed nor expired
        with pytest.raises(RuntimeError, match="shut down"):
            p.try_complete_else_watch(Op(5), ["k"])

    run_on_loop(main)


def test_loop_driven_expiry_and_completion(run_on_loop: Any) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        timer = Timer()
        timer.start()
        p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer, purge_interval=5)
        log: list = []
        expired = loop.create_future()

        class Last(Op):
            def on_expiration(self) -> None:
                super().on_expiration()
                expired.set_result(None)

        ops = [Op(30, f"o{i}", log) for i in range(20)]
        for op in ops:
            p.try_complete_else_watch(op, ["k"])
        p.try_complete_else_watch(Last(60, "last", log), ["k"])
        for op in ops[:10]:
            op.ready = True
        assert p.check_and_complete("k") == 10
        await asyncio.wait_for(expired, 10)
        assert sum(1 for e in log if e[1] == "expire") == 11
        assert sum(1 for e in log if e[1] == "complete") == 21
        assert p.num_delayed == 0 and timer.armed_handles == 0
        assert loop.counter.max_live == 1
        p.shutdown()

    run_on_loop(main)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "ready", "check", "force", "advance"]),
                          st.integers(0, 15), st.integers(0, 3)), max_size=120),
       st.integers(0, 6))
def test_purgatory_invariants(script: list, purge_interval: int) -> None:
    timer = Timer(wheel_size=4)
    p: DelayedOperationPurgatory[Op] = DelayedOperationPurgatory("t", timer, purge_interval=purge_interval)
    keys = ["a", "b", "c", "d"]
    log: list = []
    ops: dict[int, Op] = {}
    submitted: dict[int, list[str]] = {}
    now = 0
    for action, i, k in script:
        checked = False  # did the purge check run in this step?
        if action == "submit" and i not in ops:
            checked = True
            op = ops[i] = Op(1 + (i * 13) % 40, str(i), log)
            submitted[i] = keys[: k + 1]
            p.try_complete_else_watch(op, submitted[i])
        elif action == "ready" and i in ops:
            ops[i].ready = True
        elif action == "check":
            p.check_and_complete(keys[k])
        elif action == "force" and i in ops:
            ops[i].force_complete()
        elif action == "advance":
            checked = k > 0
            now += k * 7
            timer.advance_clock(now)
        lists = {key: p.watchers_for(key) for key in p.watched_keys()}
        assert p.watched == sum(len(v) for v in lists.values())
        assert all(lists.values())  # no empty lists kept
        pending = [o for o in ops.values() if not o.completed]
        assert p.num_delayed == len(pending) == sum(1 for o in ops.values() if o.pending)
        for j, o in ops.items():  # every pending op is watched under all its keys
            if not o.completed:
                assert all(o in lists.get(key, []) for key in submitted[j])
        # after a check, the estimated completed-but-watched count is within the purge interval
        if checked:
            assert p.estimated_total - p.num_delayed <= purge_interval
        # the estimate never under-counts the distinct completed operations still watched
        completed_watched = {id(o) for v in lists.values() for o in v if o.completed}
        assert p.estimated_total - p.num_delayed >= len(completed_watched)
    for name in {e[0] for e in log}:
        entries = [e for e in log if e[0] == name]
        assert [e[1] for e in entries].count("complete") == 1
        if ("expire") in [e[1] for e in entries]:
            assert entries[0] == (name, "complete", True) and entries[1] == (name, "expire")
