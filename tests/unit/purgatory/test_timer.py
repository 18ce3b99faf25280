"""Manual-clock tests of the hierarchical timing wheel (deterministic: advance_clock only)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamproc.purgatory import Timer, TimerTask


def make(timer: Timer, fired: list, name: object, delay: int) -> TimerTask:
    task = TimerTask(delay, lambda: fired.append((name, timer.now_ms)))
    timer.add(task)
    return task


@pytest.mark.parametrize("wheel_size", [2, 3, 20, 512])
def test_tasks_at_every_level_fire_exactly_at_their_time(wheel_size: int) -> None:
    timer = Timer(tick_ms=1, wheel_size=wheel_size, start_ms=0)
    fired: list = []
    delays = sorted({1, 2, 3, 4, 5, 9, 10, 11, 19, 20, 21, 99, 100, 399, 400, 401, 1000, 4096, 8000, 8001})
    for d in delays:
        make(timer, fired, d, d)
    assert len(timer) == len(delays)
    expected_levels = 1
    span = wheel_size
    while span <= max(delays):
        span *= wheel_size
        expected_levels += 1
    assert timer.levels == expected_levels
    for now in range(1, max(delays) + 1):
        n = timer.advance_clock(now)
        assert n == (1 if now in delays else 0), now
    assert fired == [(d, d) for d in delays]
    assert len(timer) == 0


def test_overflow_wheels_are_created_on_demand() -> None:
    timer = Timer(wheel_size=8)
    assert timer.levels == 1
    timer.add(TimerTask(7))
    assert timer.levels == 1
    timer.add(TimerTask(8))
    assert timer.levels == 2
    timer.add(TimerTask(8 ** 3))
    assert timer.levels == 4


def test_cascade_from_overflow_wheels_with_nonzero_start() -> None:
    timer = Timer(wheel_size=3, start_ms=1_000_003)
    fired: list = []
    delays = list(range(5)) + list(range(10, 100)) * 2 + list(range(100, 500))
    for i, d in enumerate(delays):
        make(timer, fired, (i, d), d)
    # delay 0 ran inside add
    assert [name for name, _ in fired] == [(0, 0)]
    assert len(timer) == len(delays) - 1
    for now in range(1_000_004, 1_000_003 + 500):
        timer.advance_clock(now)
    assert len(timer) == 0
    assert sorted(fired, key=lambda f: f[1]) == fired  # never out of time order
    for (i, d), at in fired:
        assert at == 1_000_003 + d


def test_large_clock_jump_runs_everything_due_once_in_order() -> None:
    timer = Timer(wheel_size=4)
    fired: list = []
    for d in [1, 3, 4, 5, 17, 64, 65, 300, 5000, 5001, 70_000]:
        make(timer, fired, d, d)
    assert timer.advance_clock(5000) == 9
    assert [n for n, _ in fired] == [1, 3, 4, 5, 17, 64, 65, 300, 5000]
    assert len(timer) == 2
    assert timer.advance_clock(10**9) == 2
    assert [n for n, _ in fired][-2:] == [5001, 70_000]
    assert len(timer) == 0 and timer.now_ms == 10**9


def test_many_tasks_in_one_millisecond() -> None:
    timer = Timer(wheel_size=20)
    fired: list = []
    tasks = [make(timer, fired, i, 7) for i in range(10_000)]
    assert len(timer) == 10_000
    for t in tasks[::2]:
        assert t.cancel()
    assert len(timer) == 5_000
    assert timer.advance_clock(6) == 0
    assert timer.advance_clock(7) == 5_000
    assert [n for n, _ in fired] == list(range(1, 10_000, 2))  # FIFO within a bucket
    assert len(timer) == 0


def test_cancel_before_expiry_means_never_runs_and_len_is_exact() -> None:
    timer = Timer(wheel_size=4)
    fired: list = []
    a = make(timer, fired, "a", 3)
    b = make(timer, fired, "b", 50)  # overflow level
    c = make(timer, fired, "c", 50)
    assert len(timer) == 3 and a.pending and b.pending
    assert b.cancel() is True
    assert b.cancel() is False  # second cancel is a no-op
    assert len(timer) == 2 and not b.pending
    assert a.cancel() is True
    assert len(timer) == 1
    timer.advance_clock(100)
    assert fired == [("c", 100)]
    assert len(timer) == 0
    assert c.cancel() is False  # after expiry: no-op
    assert len(timer) == 0


def test_cancel_after_expiry_is_noop() -> None:
    timer = Timer()
    fired: list = []
    t = make(timer, fired, "t", 1)
    timer.advance_clock(1)
    assert fired == [("t", 1)]
    assert t.cancel() is False
    assert len(timer) == 0


def test_readding_a_cancelled_task_schedules_it_from_the_new_add() -> None:
    timer = Timer(wheel_size=8)
    fired: list = []
    t = make(timer, fired, "t", 10)
    timer.advance_clock(5)
    t.cancel()
    timer.advance_clock(12)
    assert fired == []
    timer.add(t)  # t_add = 12
    assert len(timer) == 1 and t.expiration_ms == 22
    timer.advance_clock(21)
    assert fired == []
    timer.advance_clock(22)
    assert fired == [("t", 22)]
    timer.add(t)  # a task that already ran can be added again
    timer.advance_clock(40)
    assert fired == [("t", 22), ("t", 40)]


def test_readding_a_pending_task_moves_it() -> None:
    timer = Timer(wheel_size=8)
    fired: list = []
    t = make(timer, fired, "t", 100)
    timer.advance_clock(3)
    timer.add(t)
    assert len(timer) == 1
    timer.advance_clock(100)
    assert fired == []
    timer.advance_clock(103)
    assert fired == [("t", 103)]
    assert len(timer) == 0


def test_delay_zero_runs_inside_add_and_negative_is_rejected() -> None:
    timer = Timer(start_ms=50)
    fired: list = []
    make(timer, fired, "zero", 0)
    assert fired == [("zero", 50)]
    assert len(timer) == 0 and timer.expired_count == 1
    for bad in (-10, timedelta(milliseconds=-1)):
        with pytest.raises(ValueError, match="negative"):
            TimerTask(bad)
    assert len(timer) == 0


def test_tick_larger_than_one_never_runs_early() -> None:
    timer = Timer(tick_ms=10, wheel_size=4, start_ms=3)
    fired: list = []
    for d in [1, 7, 17, 27, 100, 555]:
        make(timer, fired, d, d)
    for now in range(4, 700):
        timer.advance_clock(now)
    for d, at in fired:
        due = 3 + d
        assert at >= due and at == -(-due // 10) * 10, (d, at)
    assert len(fired) == 6


def test_clock_never_moves_backwards() -> None:
    timer = Timer(start_ms=100)
    fired: list = []
    make(timer, fired, "x", 5)
    assert timer.advance_clock(50) == 0
    assert timer.now_ms == 100
    assert timer.advance_clock(105) == 1


def test_actions_may_add_and_cancel_during_advance() -> None:
    timer = Timer(wheel_size=4)
    fired: list = []
    child = TimerTask(5, lambda: fired.append(("child", child.expiration_ms)))

    def first() -> None:
        fired.append(("first", timer.now_ms))
        victim.cancel()  # same bucket, not yet run
        timer.add(child)  # t_add = 12 (the advance target): due at 17
        timer.add(TimerTask(0, lambda: fired.append(("inline", timer.now_ms))))

    timer.add(TimerTask(10, first))
    victim = make(timer, fired, "victim", 10)  # behind "first" in the same bucket
    make(timer, fired, "other", 10)
    assert timer.advance_clock(12) == 2
    assert [n for n, _ in fired] == ["first", "inline", "other"]
    assert not victim.pending and len(timer) == 1
    assert timer.advance_clock(16) == 0
    assert timer.advance_clock(17) == 1
    assert fired[-1] == ("child", 17)
    assert len(timer) == 0


def test_exceptions_in_tasks_do_not_corrupt_the_wheel() -> None:
    timer = Timer()
    fired: list = []

    def boom() -> None:
        raise RuntimeError("boom")

    timer.add(TimerTask(1, boom))
    make(timer, fired, "after", 1)
    make(timer, fired, "later", 2)
    with pytest.raises(RuntimeError, match="boom"):
        timer.advance_clock(1)
    assert fired == [("after", 1)]
    timer.add(TimerTask(1, boom))
    timer.add(TimerTask(1, boom))
    with pytest.raises(ExceptionGroup):
        timer.advance_clock(3)
    assert fired == [("after", 1), ("later", 3)]
    assert len(timer) == 0


def test_advance_from_inside_a_task_is_rejected() -> None:
    timer = Timer()
    errors: list = []

    def nested() -> None:
        try:
            timer.advance_clock(100)
        except RuntimeError as exc:
            errors.append(exc)

    timer.add(TimerTask(1, nested))
    timer.advance_clock(1)
    assert len(errors) == 1


def test_run_override_and_timedelta_delay() -> None:
    ran: list = []

    class Mine(TimerTask):
        __slots__ = ()

        def run(self) -> None:
            ran.append(self.expiration_ms)

    timer = Timer()
    timer.add(Mine(timedelta(milliseconds=1500)))
    timer.advance_clock(1499)
    assert ran == []
    timer.advance_clock(1500)
    assert ran == [1500]


def test_close_drops_pending_tasks() -> None:
    timer = Timer(wheel_size=4)
    fired: list = []
    tasks = [make(timer, fired, d, d) for d in (1, 5, 100)]
    assert timer.close() == 3
    assert len(timer) == 0 and not any(t.pending for t in tasks)
    timer.advance_clock(1000)
    assert fired == []
    timer.add(tasks[0])  # still usable
    timer.advance_clock(1001)
    assert fired == [(1, 1001)]


def test_empty_timer_is_truthy() -> None:
    assert Timer()
    assert len(Timer()) == 0


@pytest.mark.parametrize("kwargs, err", [
    ({"tick_ms": 0}, ValueError), ({"wheel_size": 1}, ValueError), ({"tick_ms": 1.5}, TypeError),
    ({"start_ms": "0"}, TypeError), ({"wheel_size": True}, TypeError),
])
def test_bad_timer_arguments(kwargs: dict, err: type) -> None:
    with pytest.raises(err, match=next(iter(kwargs))):
        Timer(**kwargs)


def test_bad_task_arguments() -> None:
    with pytest.raises(TypeError, match="delay_ms"):
        TimerTask("10")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="action"):
        TimerTask(10, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="advance_clock"):
        Timer().advance_clock(1.5)  # type: ignore[arg-type]
