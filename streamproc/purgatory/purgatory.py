"""The delayed-operation purgatory: watcher lists per key plus a timing-wheel timeout."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Generic, TypeVar

from .operation import DelayedOperation
from .timer import Timer

__all__ = ["DelayedOperationPurgatory"]

Op = TypeVar("Op", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Op]):
    """Holds delayed operations until their condition holds (checked per key) or they time out.

    ``DelayedOperationPurgatory(name, timer, purge_interval=1000)``; ``timer=None`` creates a private
    :class:`Timer`. The purgatory should own its timer (as in Kafka): :attr:`num_delayed` is
    ``len(timer)``, so other tasks on a shared timer would count as delayed operations here and make
    the purge estimate late (never wrong: purges only drop completed operations).

    - :meth:`try_complete_else_watch` ``(op, keys)``: try to complete; if not, watch ``op`` under every
      key, try once more (so an event between the first try and the watching is not lost), then
      arm its timeout in the timer. Returns True iff ``op`` completed during this call by its
      condition (an operation with ``delay_ms <= 0`` that expires inside the call returns False).
    - :meth:`check_and_complete` ``(key)``: try every operation watched under ``key``; drop completed
      ones from that list; returns how many this call completed.
    - Completed operations are unlinked from the timer at once (O(1)) but stay in the watcher lists
      of other keys until a check of that key or a purge. The purge follows the seed exactly: an
      estimate ``E`` of the operations in the purgatory is incremented once per newly watched
      operation; when ``E - num_delayed > purge_interval`` (``num_delayed`` being exact), ``E`` is
      reset to ``num_delayed`` and every watcher list is scanned to drop completed operations.
      The check runs after each watch and after each timer advance.
    - :attr:`watched` is the total number of watcher-list entries (an operation counts once per key,
      completed-but-not-yet-purged entries included), as Kafka's ``PurgatorySize``.
    - :meth:`shutdown`: cancels the timeout of every pending operation (they neither complete nor
      expire), clears the lists and stops the timer; afterwards no loop callback is armed.
    """

    def __init__(self, name: str, timer: Timer | None = None, purge_interval: int = 1000) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"purgatory name must be a non-empty string, got {name!r}")
        if isinstance(purge_interval, bool) or not isinstance(purge_interval, int) or purge_interval < 0:
            raise ValueError(f"purge_interval of purgatory {name!r} must be an int >= 0, got {purge_interval!r}")
        if timer is not None and not isinstance(timer, Timer):
            raise TypeError(f"timer of purgatory {name!r} must be a streamproc Timer, got {timer!r}")
        self.name = name
        self.purge_interval = purge_interval
        self.timer: Timer = Timer() if timer is None else timer
        self._watchers: dict[Hashable, list[Op]] = {}
        self._watched = 0
        self._estimated = 0
        self._closed = False
        #: number of purges run / watcher entries they dropped (introspection)
        self.purges = 0
        self.purged_entries = 0
        self.timer.add_advance_listener(self._maybe_purge)

    # ------------------------------------------------------------------ counters
    @property
    def num_delayed(self) -> int:
        """Operations waiting in the timer (exact: completion unlinks in O(1))."""
        return len(self.timer)

    @property
    def watched(self) -> int:
        """Total watcher-list entries over all keys (completed-but-unpurged entries included)."""
        return self._watched

    @property
    def estimated_total(self) -> int:
        """The purge estimate ``E`` (see the class docstring)."""
        return self._estimated

    def watched_keys(self) -> list[Hashable]:
        return list(self._watchers)

    def watchers_for(self, key: Hashable) -> list[Op]:
        """A copy of ``key``'s watcher list (may include completed operations not yet dropped)."""
        return list(self._watchers.get(key, ()))

    # ------------------------------------------------------------------ operations
    def try_complete_else_watch(self, op: Op, keys: Iterable[Hashable]) -> bool:
        """Complete ``op`` now if possible, else watch it under ``keys`` and arm its timeout."""
        if self._closed:
            raise RuntimeError(f"purgatory {self.name!r} is shut down")
        keys = list(keys)
        if not keys:
            raise ValueError(f"purgatory {self.name!r}: an operation needs at least one watch key, got none")
        if op.completed or op.pending:
            raise ValueError(f"purgatory {self.name!r}: {op!r} was already submitted (completed or pending)")
        if op.try_complete():
            return True
        watchers = self._watchers
        added = 0
        for key in keys:
            if op.completed:
                break
            lst = watchers.get(key)
            if lst is None:
                watchers[key] = [op]
            else:
                lst.append(op)
            added += 1
        self._watched += added
        self._estimated += 1
        if op.try_complete():
            self._maybe_purge()
            return True
        if not op.completed:
            self.timer.add(op)
        self._maybe_purge()
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete every operation watched under ``key``; returns how many completed here.

        Completed operations (here or elsewhere) leave ``key``'s list. Safe against re-entrancy:
        an ``on_complete()`` may submit or check operations, on this key too.
        """
        watchers = self._watchers
        lst = watchers.pop(key, None)
        if lst is None:
            return 0
        keep: list[Op] = []
        completed = 0
        try:
            for i, op in enumerate(lst):
                if op.completed:
                    continue
                try:
                    done = op.try_complete()
                except BaseException:
                    # keep the list consistent: unchecked operations stay watched
                    keep.extend(o for o in lst[i:] if not o.completed)
                    raise
                if done:
                    completed += 1
                elif not op.completed:
                    keep.append(op)
        finally:
            self._watched -= len(lst) - len(keep)
            added = watchers.pop(key, None)  # watched re-entrantly while we iterated
            if added:
                keep.extend(added)
            if keep:
                watchers[key] = keep
        return completed

    def cancel_for_key(self, key: Hashable) -> list[Op]:
        """Stop watching ``key``: remove its list and cancel the timeout of its pending operations
        (they are not completed and will not expire). Returns those pending operations."""
        lst = self._watchers.pop(key, None)
        if lst is None:
            return []
        self._watched -= len(lst)
        pending = [op for op in lst if not op.completed]
        for op in pending:
            op.cancel()
        return pending

    def purge(self) -> int:
        """Reset the estimate to ``num_delayed`` and drop completed operations from every list.

        Returns the number of watcher entries dropped. Normally triggered by the estimate.
        """
        self._estimated = len(self.timer)
        watchers = self._watchers
        dropped = 0
        for key in list(watchers):
            lst = watchers[key]
            keep = [op for op in lst if not op.completed]
            if len(keep) != len(lst):
                dropped += len(lst) - len(keep)
                if keep:
                    watchers[key] = keep
                else:
                    del watchers[key]
        self._watched -= dropped
        self.purges += 1
        self.purged_entries += dropped
        return dropped

    def _maybe_purge(self) -> None:
        if self._estimated - len(self.timer) > self.purge_interval:
            self.purge()

    def shutdown(self, stop_timer: bool = True) -> None:
        """Cancel every pending operation's timeout (none completes or expires), clear the lists,
        detach from the timer and (by default) stop it so no loop callback stays armed."""
        if self._closed:
            return
        self._closed = True
        self.timer.remove_advance_listener(self._maybe_purge)
        for lst in self._watchers.values():
            for op in lst:
                if not op.completed:
                    op.cancel()
        self._watchers.clear()
        self._watched = 0
        self._estimated = 0
        if stop_timer:
            self.timer.stop()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        return (f"DelayedOperationPurgatory({self.name!r}, num_delayed={self.num_delayed}, "
                f"watched={self._watched}, estimated={self._estimated})")
