"""Hierarchical timing wheel (Kafka's purgatory timer) with an asyncio clock driver.

Structure (the seed's "Purgatory Redesign Proposal"):

- Level ``k`` is a wheel of ``wheel_size`` buckets, each covering ``tick_ms * wheel_size**k`` ms.
  Level 0 covers ``[now, now + tick_ms * wheel_size)`` at tick resolution; a task due later goes to
  the first level whose span reaches it. Levels above 0 are created on demand.
- A bucket is a doubly-linked list (:class:`~streamproc.purgatory.task.TimerTaskList`); a task is
  its own list entry, so insert is O(levels) and cancel is O(1).
- A bucket that becomes non-empty for a new time range is pushed once onto a small heap of buckets
  keyed by its expiration (the start of its range). The bucket's expiration drives the clock:
  :meth:`Timer.advance_clock` pops every due bucket in expiration order, moves the wheels to it and
  re-inserts its tasks, which either run (due) or cascade to a finer level.
- In a running event loop (:meth:`Timer.start`) the clock is driven by ONE ``loop.call_at`` handle,
  armed for the earliest non-empty bucket and re-armed only when that changes; never a handle per task.

Timing rule: a task added with ``delay_ms`` runs during the first ``advance_clock(now)`` with
``now >= t_add + delay_ms`` (with ``tick_ms > 1`` the due time is rounded *up* to a multiple of
``tick_ms``: tasks never run early). ``t_add`` is the timer's clock at ``add``: its last
``advance_clock`` value (or ``start_ms``) in manual mode; the event loop's clock (mapped to timer
milliseconds) while started. ``delay_ms <= 0`` runs the task inside ``add``.

Single-threaded: call everything from one thread (the event loop's when started).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from heapq import heappop, heappush
from typing import Self

from ..time import duration_ms
from .task import TimerTask, TimerTaskList

__all__ = ["DEFAULT_WHEEL_SIZE", "Timer"]

#: Default buckets per wheel. Measured with benchmarks/bench_purgatory.py (see docs/purgatory.md):
#: larger wheels avoid Python-level cascades; with 1 ms ticks 256-1024 are the fastest group, and 512
#: was fastest or within ~10 % of it for 200 ms and 1-30 s delays (20, Kafka's value, costs 2-40 % more
#: per insert+cancel pair and 50-95 % more per expiry, because of cascades).
DEFAULT_WHEEL_SIZE = 512

_NO_ARM = -(1 << 62)  # manual mode (or inside advance_clock): bucket pushes never arm a loop handle
_IDLE = 1 << 62  # started, no handle armed: any pushed bucket arms one


class Timer:
    """Hierarchical timing wheel. ``Timer(tick_ms=1, wheel_size=DEFAULT_WHEEL_SIZE, start_ms=0)``.

    - :meth:`add` schedules a :class:`TimerTask`; ``len(timer)`` is exactly the number of pending
      tasks (a cancel decrements it at once).
    - :meth:`advance_clock` is the deterministic API: ``advance_clock(now_ms)`` runs every task due at
      or before ``now_ms`` and returns how many ran. The clock never moves backwards (an earlier value
      is a no-op returning 0).
    - :meth:`start` / :meth:`stop` attach the timer to an asyncio (or uvloop) loop, which then drives
      the clock with a single ``call_at`` handle; ``async with timer:`` does both.

    Exceptions raised by tasks never corrupt the wheel: in manual mode ``advance_clock`` finishes the
    whole advance and then re-raises (one error as is, several as an ``ExceptionGroup``); when
    started, each error goes to ``loop.call_exception_handler``.
    """

    __slots__ = (
        "__weakref__",
        "_advancing",
        "_armed_at",
        "_b0",
        "_c0",
        "_cur",
        "_handle",
        "_levels",
        "_listeners",
        "_loop",
        "_loop_time",
        "_next_key",
        "_now",
        "_offset",
        "_queue",
        "_spans",
        "arm_count",
        "expired_count",
        "pending",
        "tick_ms",
        "wheel_size",
    )

    def __init__(self, tick_ms: int | timedelta = 1, wheel_size: int = DEFAULT_WHEEL_SIZE, start_ms: int = 0) -> None:
        if isinstance(tick_ms, timedelta):  # docs/semantics.md, "Time and stream time": durations accept timedelta
            tick_ms = duration_ms(tick_ms, "tick_ms", "Timer")
        for name, value, low in (("tick_ms", tick_ms, 1), ("wheel_size", wheel_size, 2)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"Timer {name} must be an int, got {type(value).__name__} {value!r}")
            if value < low:
                raise ValueError(f"Timer {name} must be >= {low}, got {value}")
        if isinstance(start_ms, bool) or not isinstance(start_ms, int):
            raise TypeError(f"Timer start_ms must be int milliseconds, got {type(start_ms).__name__} {start_ms!r}")
        self.tick_ms = tick_ms
        self.wheel_size = wheel_size
        self._now = start_ms
        #: tasks added and neither run nor cancelled (``len(timer)``; a cancel decrements it)
        self.pending = 0
        self._next_key = 0
        self._levels: list[list[TimerTaskList]] = []
        self._cur: list[int] = []  # per level: its current time in ticks, a multiple of its span
        self._spans: list[int] = []  # per level: ticks covered by one bucket (wheel_size ** level)
        self._c0 = start_ms // tick_ms
        self._queue: list[tuple[int, int, TimerTaskList]] = []
        self._add_level()
        self._b0 = self._levels[0]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_time: Callable[[], float] | None = None
        self._offset = 0
        self._handle: asyncio.Handle | None = None
        self._armed_at = _NO_ARM
        self._advancing = False
        self._listeners: list[Callable[[], None]] = []
        #: number of ``loop.call_at`` calls made so far (introspection, benchmarks)
        self.arm_count = 0
        #: number of tasks that ran (expired) so far, including ``delay_ms <= 0`` tasks run at ``add``
        self.expired_count = 0

    # ------------------------------------------------------------------ introspection
    def __len__(self) -> int:
        return self.pending

    def __bool__(self) -> bool:  # a timer is truthy even when empty (len() is the pending count)
        return True

    @property
    def now_ms(self) -> int:
        """The clock ``add`` uses as ``t_add``: last advance (manual) or the loop's clock (started)."""
        lt = self._loop_time
        if lt is None:
            return self._now
        now = int(lt() * 1000.0) - self._offset
        return max(self._now, now)

    @property
    def levels(self) -> int:
        """Number of wheels created so far (1 + overflow wheels)."""
        return len(self._levels)

    @property
    def queued_buckets(self) -> int:
        """Buckets in the bucket queue (each at most once; may include buckets emptied by cancels)."""
        return len(self._queue)

    @property
    def started(self) -> bool:
        return self._loop is not None

    @property
    def armed_handles(self) -> int:
        """Loop handles currently armed by this timer: 0 or 1, never more."""
        return 0 if self._handle is None else 1

    @property
    def armed_at_ms(self) -> int | None:
        """Timer time (ms) the armed handle is due at, or None."""
        return None if self._handle is None else self._armed_at * self.tick_ms

    # ------------------------------------------------------------------ wheels
    def _add_level(self) -> None:
        level = len(self._levels)
        span = self.wheel_size ** level
        buckets = []
        for _ in range(self.wheel_size):
            buckets.append(TimerTaskList(self, self._next_key, level))
            self._next_key += 1
        self._levels.append(buckets)
        self._spans.append(span)
        c0 = self._c0
        self._cur.append(c0 - c0 % span)

    def _set_clock(self, v: int) -> None:
        """Move every wheel's current time to tick ``v`` (only forwards)."""
        self._c0 = v
        cur = self._cur
        spans = self._spans
        for k in range(len(cur)):
            cur[k] = v - v % spans[k]

    def _insert(self, task: TimerTask, v: int) -> None:
        """Link a not-due task (``v > current tick``) into the finest level whose span reaches it."""
        wsize = self.wheel_size
        k = 0
        cur = self._cur
        spans = self._spans
        while True:
            if k == len(cur):
                self._add_level()
            span = spans[k]
            if v < cur[k] + span * wsize:
                vid = v // span
                bucket = self._levels[k][vid % wsize]
                tail = bucket.prev_node
                task.prev_node = tail
                task.next_node = bucket
                tail.next_node = task  # type: ignore[union-attr]
                bucket.prev_node = task
                task.timer_bucket = bucket
                self.pending += 1
                exp = vid * span
                if bucket.expiration != exp:
                    bucket.expiration = exp
                    heappush(self._queue, (exp, bucket.key, bucket))
                    if exp < self._armed_at:
                        self._arm(exp)
                return
            k += 1

    # ------------------------------------------------------------------ public API
    def add(self, task: TimerTask) -> None:
        """Schedule ``task`` at ``now_ms + task.delay_ms``; ``delay_ms <= 0`` runs it right here.

        A task that is still pending is moved (re-scheduled from now). O(levels) + O(log buckets)
        when its bucket starts a new time range; no loop interaction unless that bucket becomes the
        earliest one.
        """
        if task.timer_bucket is not None:
            task.cancel()
        lt = self._loop_time
        if lt is None:
            now = self._now
        else:
            now = int(lt() * 1000.0) - self._offset
            now = max(now, self._now)
        delay = task.delay_ms
        exp = now + delay
        task.expiration_ms = exp
        if delay <= 0:
            self.expired_count += 1
            task.run()
            return
        tick = self.tick_ms
        v = exp if tick == 1 else -(-exp // tick)
        task.due_tick = v
        wsize = self.wheel_size
        if v < self._c0 + wsize:
            # level 0, inlined: the hot path
            bucket = self._b0[v % wsize]
            tail = bucket.prev_node
            task.prev_node = tail
            task.next_node = bucket
            tail.next_node = task  # type: ignore[union-attr]
            bucket.prev_node = task
            task.timer_bucket = bucket
            self.pending += 1
            if bucket.expiration != v:
                bucket.expiration = v
                heappush(self._queue, (v, bucket.key, bucket))
                if v < self._armed_at:
                    self._arm(v)
        else:
            self._insert(task, v)

    def advance_clock(self, now_ms: int) -> int:
        """Move the clock to ``now_ms``; run every task due at or before it; return how many ran.

        Due buckets are processed in expiration order; a bucket of an overflow wheel cascades its
        tasks to finer wheels (or runs them when due). Tasks added by running tasks are scheduled
        from ``now_ms`` and run in this same call only if due by ``now_ms`` (never, for a positive
        delay). Calling it from inside a running task raises ``RuntimeError``.
        """
        if isinstance(now_ms, bool) or not isinstance(now_ms, int):
            raise TypeError(f"advance_clock expects int milliseconds, got {type(now_ms).__name__} {now_ms!r}")
        if self._advancing:
            raise RuntimeError("Timer.advance_clock called from inside a running timer task")
        if now_ms <= self._now:
            if self._loop is not None and self._handle is None:
                self._rearm_head()
            return 0
        self._now = now_ms
        vnow = now_ms // self.tick_ms
        queue = self._queue
        count = 0
        errors: list[Exception] | None = None
        saved_armed = self._armed_at
        self._armed_at = _NO_ARM
        self._advancing = True
        try:
            while queue and queue[0][0] <= vnow:
                exp, _, bucket = heappop(queue)
                bucket.expiration = -1
                if exp > self._c0:
                    self._set_clock(exp)
                c0 = self._c0
                node = bucket.next_node
                while node is not bucket:
                    nxt = node.next_node  # type: ignore[union-attr]
                    bucket.next_node = nxt
                    nxt.prev_node = bucket  # type: ignore[union-attr]
                    node.prev_node = node.next_node = node.timer_bucket = None  # type: ignore[union-attr]
                    self.pending -= 1
                    v = node.due_tick  # type: ignore[union-attr]
                    if v <= c0:
                        count += 1
                        try:
                            node.run()  # type: ignore[union-attr]
                        except Exception as exc:  # noqa: BLE001 - reported after the advance
                            if errors is None:
                                errors = []
                            errors.append(exc)
                    else:
                        self._insert(node, v)  # type: ignore[arg-type]
                    node = bucket.next_node
            if vnow > self._c0:
                self._set_clock(vnow)
        finally:
            self._advancing = False
            self.expired_count += count
            self._armed_at = saved_armed
            if self._loop is not None:
                self._rearm_head()
        for listener in tuple(self._listeners):
            listener()
        if errors:
            self._report(errors)
        return count

    def add_advance_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every :meth:`advance_clock` (manual or loop-driven)."""
        self._listeners.append(listener)

    def remove_advance_listener(self, listener: Callable[[], None]) -> None:
        """Remove a listener added by :meth:`add_advance_listener` (no-op when absent)."""
        try:
            self._listeners.remove(listener)
        except ValueError:
            pass

    # ------------------------------------------------------------------ event-loop driver
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Let ``loop`` (default: the running loop) drive the clock with one ``call_at`` handle.

        The timer's clock continues from its current value: from now on timer time is
        ``int(loop.time() * 1000) - offset``, offset fixed here. Starting twice on the same loop is a
        no-op; starting on another loop while started raises ``RuntimeError``.
        """
        if loop is None:
            loop = asyncio.get_running_loop()
        if self._loop is not None:
            if self._loop is loop:
                return
            raise RuntimeError("Timer is already started on another event loop; stop() it first")
        self._loop = loop
        self._loop_time = loop.time
        self._offset = int(loop.time() * 1000.0) - self._now
        self._armed_at = _IDLE
        self._rearm_head()

    def stop(self) -> None:
        """Detach from the loop: cancel the armed handle (none remains). Pending tasks stay pending
        and the timer keeps working in manual mode (``advance_clock``)."""
        handle = self._handle
        if handle is not None:
            handle.cancel()
        self._handle = None
        self._loop = None
        self._loop_time = None
        self._armed_at = _NO_ARM

    def close(self) -> int:
        """:meth:`stop`, then drop every pending task without running it; returns how many."""
        self.stop()
        dropped = 0
        for buckets in self._levels:
            for bucket in buckets:
                node = bucket.next_node
                while node is not bucket:
                    nxt = node.next_node  # type: ignore[union-attr]
                    node.prev_node = node.next_node = node.timer_bucket = None  # type: ignore[union-attr]
                    dropped += 1
                    node = nxt  # type: ignore[assignment]
                bucket.next_node = bucket.prev_node = bucket
                bucket.expiration = -1
        self._queue.clear()
        self.pending -= dropped
        return dropped

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.stop()

    def _arm(self, v: int) -> None:
        """(Re-)arm the single loop handle for bucket expiration ``v`` (ticks)."""
        handle = self._handle
        if handle is not None:
            handle.cancel()
        loop = self._loop
        assert loop is not None
        self._armed_at = v
        self.arm_count += 1
        self._handle = loop.call_at((v * self.tick_ms + self._offset) / 1000.0, self._fire)

    def _rearm_head(self) -> None:
        """Arm for the earliest non-empty bucket (dropping emptied ones), only if it changed."""
        queue = self._queue
        while queue and queue[0][2].next_node is queue[0][2]:
            heappop(queue)[2].expiration = -1
        head = queue[0][0] if queue else _IDLE
        if head == self._armed_at and (head == _IDLE or self._handle is not None):
            return
        if head == _IDLE:
            handle = self._handle
            if handle is not None:
                handle.cancel()
            self._handle = None
            self._armed_at = _IDLE
        else:
            self._arm(head)

    def _fire(self) -> None:
        target = self._armed_at
        self._handle = None
        self._armed_at = _IDLE
        lt = self._loop_time
        if lt is None:  # stopped in between (cannot happen: stop cancels the handle)
            return
        now = int(lt() * 1000.0) - self._offset
        due = target * self.tick_ms
        # the loop may wake a fraction of a ms early (uvloop rounds to ms): the handle was for `due`
        now = max(now, due)
        try:
            self.advance_clock(now)
        except Exception as exc:  # noqa: BLE001 - a listener failed; keep the loop alive
            self._report([exc])

    def _report(self, errors: list[Exception]) -> None:
        loop = self._loop
        if loop is None:
            if len(errors) == 1:
                raise errors[0]
            raise ExceptionGroup("timer tasks raised", errors)
        for exc in errors:
            loop.call_exception_handler({"message": "streamproc Timer: a timer task raised", "exception": exc})

    def __repr__(self) -> str:
        return (f"Timer(tick_ms={self.tick_ms}, wheel_size={self.wheel_size}, now_ms={self._now}, "
                f"pending={self.pending}, levels={len(self._levels)}, started={self._loop is not None})")
