"""Timer tasks and the doubly-linked bucket lists of the timing wheel.

A :class:`TimerTask` *is* its own list entry (an intrusive doubly-linked list): it holds the links
``prev_node``/``next_node`` and the bucket it sits in, so adding it to a bucket and cancelling it are
O(1) pointer updates with no allocation. A bucket (:class:`TimerTaskList`) is the circular list's
root sentinel. Everything runs on one thread (the event loop's), so there are no locks.

**Node fields** (public so that the compiled timer links and unlinks nodes with plain attribute
writes on its hot path; the timer package is their only writer, everyone else reads them at most):

- ``prev_node``, ``next_node`` (tasks and buckets): the neighbours in the bucket's circular list. A
  bucket's own links point to itself when it is empty; a task's are None while it is not pending.
- ``TimerTask.timer_bucket``: the :class:`TimerTaskList` the task is linked into, None when it is
  not pending (never added, run, cancelled or dropped by ``Timer.close``).
- ``TimerTask.due_tick``: the task's due time in timer ticks (``expiration_ms`` rounded up to a
  tick), set by ``Timer.add``; meaningful only while the task is pending.

Invariant: a task is pending exactly when ``timer_bucket`` is not None, and then it sits in that
bucket's list between ``prev_node`` and ``next_node``. Subclasses must not use these names.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Protocol


class TaskCounter(Protocol):
    """What a bucket needs of its timer: the count of pending tasks (one less per cancelled task)."""

    pending: int

__all__ = ["TimerTask", "TimerTaskList"]


def _delay_ms(value: int | timedelta, owner: str) -> int:
    """Normalise a task delay: int ms or timedelta, >= 0 (docs/semantics.md, "Time and stream time"; zero: due at once)."""
    if isinstance(value, bool):
        raise TypeError(f"delay_ms of {owner} must be int milliseconds or timedelta, got bool {value!r}")
    if isinstance(value, timedelta):
        ms = (value.days * 86_400_000) + (value.seconds * 1000) + (value.microseconds // 1000)
    elif isinstance(value, int):
        ms = value
    else:
        ms = None
    if ms is not None:
        if ms < 0:
            raise ValueError(f"delay_ms of {owner} must not be negative, got {value!r}")
        return ms
    raise TypeError(
        f"delay_ms of {owner} must be int milliseconds or timedelta, got {type(value).__name__} {value!r}"
    )


class _Link:
    """The two link slots (node fields, see the module docstring) shared by entries and the root
    sentinel of a bucket."""

    __slots__ = ("next_node", "prev_node")

    prev_node: _Link | None
    next_node: _Link | None


class TimerTask(_Link):
    """A one-shot task for a :class:`~streamproc.purgatory.Timer`.

    ``TimerTask(delay_ms, action=None)``: when the timer's clock reaches ``t_add + delay_ms`` (``t_add``
    being the timer's clock at :meth:`Timer.add`) the timer calls :meth:`run`, which calls ``action()``.
    Subclasses may override :meth:`run` instead of passing an action. A task added with
    ``delay_ms <= 0`` runs inside :meth:`Timer.add`.

    :meth:`cancel` before the task ran means it never runs; it is O(1) (the task unlinks itself from
    its bucket). A cancelled (or already run) task may be added again and is then scheduled anew from
    the clock at that new ``add``. Adding a task that is still pending moves it (its old schedule is
    dropped). ``expiration_ms`` is the absolute timer time of the latest ``add``.
    """

    __slots__ = ("action", "delay_ms", "due_tick", "expiration_ms", "timer_bucket")

    due_tick: int  # node field: expiration in ticks (rounded up), set by Timer.add

    def __init__(self, delay_ms: int | timedelta, action: Callable[[], object] | None = None) -> None:
        # hot path: plain int delays skip the validation helper; links stay unset until Timer.add
        self.delay_ms: int = (delay_ms if delay_ms.__class__ is int and delay_ms >= 0  # type: ignore[operator]
                              else _delay_ms(delay_ms, type(self).__name__))
        if action is not None and not callable(action):
            raise TypeError(f"action of {type(self).__name__} must be callable, got {action!r}")
        self.action = action
        self.expiration_ms: int = -1
        self.timer_bucket: TimerTaskList | None = None  # node field (see the module docstring)

    @property
    def pending(self) -> bool:
        """True while the task sits in a timer (added, not yet run, not cancelled)."""
        return self.timer_bucket is not None

    def run(self) -> None:
        """Called by the timer when the task is due; calls ``action()`` when one was given."""
        action = self.action
        if action is not None:
            action()

    def cancel(self) -> bool:
        """Remove the task from its timer in O(1). Returns True if it was pending, False otherwise.

        ``len(timer)`` drops by one at once. Cancelling a task that is not pending is a no-op.
        """
        bucket = self.timer_bucket
        if bucket is None:
            return False
        prev = self.prev_node
        nxt = self.next_node
        prev.next_node = nxt  # type: ignore[union-attr]
        nxt.prev_node = prev  # type: ignore[union-attr]
        self.prev_node = self.next_node = self.timer_bucket = None
        bucket.timer.pending -= 1
        return True

    def __repr__(self) -> str:
        state = "pending" if self.timer_bucket is not None else "idle"
        return f"{type(self).__name__}(delay_ms={self.delay_ms}, expiration_ms={self.expiration_ms}, {state})"


class TimerTaskList(_Link):
    """A bucket: circular doubly-linked list of tasks whose root sentinel is the bucket itself.

    ``expiration`` is the bucket's due time in ticks (the start of its time range) while it is queued
    in the timer's bucket queue, else -1. ``key`` is a unique int that breaks ties in that queue.
    """

    __slots__ = ("expiration", "key", "level", "timer")

    def __init__(self, timer: TaskCounter, key: int, level: int) -> None:
        self.timer = timer
        self.expiration = -1
        self.key = key
        self.level = level
        self.prev_node = self
        self.next_node = self

    @property
    def empty(self) -> bool:
        return self.next_node is self

    def __len__(self) -> int:
        n = 0
        node = self.next_node
        while node is not self:
            n += 1
            node = node.next_node  # type: ignore[union-attr]
        return n

    def tasks(self) -> list[TimerTask]:
        """The tasks in insertion order (a snapshot)."""
        out: list[TimerTask] = []
        node = self.next_node
        while node is not self:
            out.append(node)  # type: ignore[arg-type]
            node = node.next_node  # type: ignore[union-attr]
        return out

    def __repr__(self) -> str:
        return f"TimerTaskList(level={self.level}, expiration={self.expiration}, size={len(self)})"
