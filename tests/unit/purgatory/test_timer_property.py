"""Property test: the timing wheel expires the same tasks at the same advance_clock steps as a heap."""

from __future__ import annotations

import heapq

from hypothesis import given, settings
from hypothesis import strategies as st

from streamproc.purgatory import Timer, TimerTask


class HeapTimer:
    """Reference: a heap of (due, seq, id) with lazy cancellation; due rounded up to the tick."""

    def __init__(self, tick_ms: int, start_ms: int) -> None:
        self.tick = tick_ms
        self.now = start_ms
        self.heap: list[tuple[int, int, int]] = []
        self.live: dict[int, int] = {}  # id -> seq of its live entry
        self.seq = 0

    def add(self, ident: int, delay: int) -> list[int]:
        self.live.pop(ident, None)
        if delay <= 0:
            return [ident]
        due = -(-(self.now + delay) // self.tick) * self.tick
        self.seq += 1
        self.live[ident] = self.seq
        heapq.heappush(self.heap, (due, self.seq, ident))
        return []

    def cancel(self, ident: int) -> bool:
        return self.live.pop(ident, None) is not None

    def advance(self, now: int) -> list[int]:
        if now <= self.now:
            return []
        self.now = now
        out = []
        while self.heap and self.heap[0][0] <= now:
            _, seq, ident = heapq.heappop(self.heap)
            if self.live.get(ident) == seq:
                del self.live[ident]
                out.append(ident)
        return out


N_TASKS = 12

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, N_TASKS - 1),
                  st.one_of(st.integers(-2, 40), st.integers(41, 5_000), st.integers(5_001, 400_000))),
        st.tuples(st.just("cancel"), st.integers(0, N_TASKS - 1), st.just(0)),
        st.tuples(st.just("advance"), st.just(0),
                  st.one_of(st.integers(0, 3), st.integers(4, 600), st.integers(601, 300_000))),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(tick=st.sampled_from([1, 1, 1, 3, 10]), wheel=st.sampled_from([2, 3, 4, 20, 64, 512]),
       start=st.integers(0, 10_000), script=ops)
def test_wheel_matches_heap_reference(tick: int, wheel: int, start: int, script: list) -> None:
    timer = Timer(tick_ms=tick, wheel_size=wheel, start_ms=start)
    ref = HeapTimer(tick, start)
    ran: list[int] = []
    tasks = [TimerTask(1, (lambda i=i: ran.append(i))) for i in range(N_TASKS)]
    now = start
    for op, ident, arg in script:
        if op == "add":
            tasks[ident].delay_ms = arg
            timer.add(tasks[ident])
            expected = ref.add(ident, arg)
            assert ran == expected
        elif op == "cancel":
            assert tasks[ident].cancel() == ref.cancel(ident)
        else:
            now += arg
            count = timer.advance_clock(now)
            expected = ref.advance(now)
            assert sorted(ran) == sorted(expected), (now, ran, expected)
            assert count == len(expected)
        ran.clear()
        assert len(timer) == len(ref.live)
        assert {i for i, t in enumerate(tasks) if t.pending} == set(ref.live)
    # drain: everything left fires by the end of time, at the same step as the reference
    count = timer.advance_clock(now + 10**7)
    assert sorted(ran) == sorted(ref.advance(now + 10**7)) and count == len(ran)
    assert len(timer) == 0
