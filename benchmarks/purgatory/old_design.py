"""The seed's "current design", ported to asyncio, as the benchmark baseline.

- One ``loop.call_later`` per operation for its timeout (cancelled when it completes): the event
  loop's own heap plays Kafka 0.8's DelayQueue of requests.
- Watcher lists per key are cleaned only by a full scan, triggered by their *size*: after every
  expiry and on a 200 ms reaper tick, ``if watched >= purge_interval: purge all lists`` (Kafka 0.8's
  ExpiredRequestReaper). With ``policy="estimated"`` the same per-op ``call_later`` timer is used with
  the new design's estimated-count purge instead, to separate the timer's effect from the purge's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable
from typing import Any


class OldOperation:
    """A delayed operation whose timeout is its own loop handle."""

    __slots__ = ("completed", "delay_ms", "handle", "purgatory")

    def __init__(self, delay_ms: int) -> None:
        self.completed = False
        self.handle: asyncio.TimerHandle | None = None
        self.delay_ms = delay_ms
        self.purgatory: OldPurgatory | None = None

    def force_complete(self) -> bool:
        if self.completed:
            return False
        self.completed = True
        handle = self.handle
        if handle is not None:
            handle.cancel()
            self.handle = None
            self.purgatory.num_delayed -= 1  # type: ignore[union-attr]
        self.on_complete()
        return True

    def try_complete(self) -> bool:
        raise TypeError("subclass OldOperation and define try_complete")

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        pass


class OldPurgatory:
    """``try_complete_else_watch`` / ``check_and_complete`` with per-op call_later timeouts."""

    def __init__(self, loop: asyncio.AbstractEventLoop, purge_interval: int = 1000,
                 policy: str = "size", reaper_ms: int = 200) -> None:
        if policy not in ("size", "estimated"):
            raise ValueError(f"unknown purge policy {policy!r}")
        self.loop = loop
        self.purge_interval = purge_interval
        self.policy = policy
        self.watchers: dict[Hashable, list[OldOperation]] = {}
        self.watched = 0
        self.num_delayed = 0
        self.estimated = 0
        self.purges = 0
        self.arm_count = 0
        self._reaper_s = reaper_ms / 1000.0
        self._reaper: asyncio.TimerHandle | None = loop.call_later(self._reaper_s, self._reap)

    def try_complete_else_watch(self, op: Any, keys: Iterable[Hashable]) -> bool:
        if op.try_complete():
            return True
        watchers = self.watchers
        for key in keys:
            if op.completed:
                break
            lst = watchers.get(key)
            if lst is None:
                watchers[key] = [op]
            else:
                lst.append(op)
            self.watched += 1
        self.estimated += 1
        if op.try_complete():
            return True
        if not op.completed:
            op.purgatory = self
            op.handle = self.loop.call_later(op.delay_ms / 1000.0, self._expire, op)
            self.arm_count += 1
            self.num_delayed += 1
        if self.policy == "estimated":
            self._maybe_purge()
        return False

    def _expire(self, op: Any) -> None:
        op.handle = None
        if not op.completed:
            self.num_delayed -= 1
            op.completed = True
            op.on_complete()
            op.on_expiration()
        self._maybe_purge()

    def _reap(self) -> None:
        self._maybe_purge()
        self._reaper = self.loop.call_later(self._reaper_s, self._reap)

    def _maybe_purge(self) -> None:
        if self.policy == "size":
            if self.watched >= self.purge_interval:
                self.purge()
        elif self.estimated - self.num_delayed > self.purge_interval:
            self.estimated = self.num_delayed
            self.purge()

    def purge(self) -> int:
        dropped = 0
        watchers = self.watchers
        for key in list(watchers):
            lst = watchers[key]
            keep = [op for op in lst if not op.completed]
            dropped += len(lst) - len(keep)
            if keep:
                watchers[key] = keep
            else:
                del watchers[key]
        self.watched -= dropped
        self.purges += 1
        return dropped

    def shutdown(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        for lst in self.watchers.values():
            for op in lst:
                if op.handle is not None:
                    op.handle.cancel()
                    op.handle = None
        self.watchers.clear()


def make_old_operation_class(now_ms: Callable[[], int], latch: Any) -> type:
    class FakeOldOperation(OldOperation):
        __slots__ = ("completes_at",)

        def __init__(self, delay_ms: int, completes_at: int) -> None:
            super().__init__(delay_ms)
            self.completes_at = completes_at

        def try_complete(self) -> bool:
            return now_ms() >= self.completes_at and self.force_complete()

        def on_complete(self) -> None:
            latch.count_down()

    return FakeOldOperation
