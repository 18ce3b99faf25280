"""Delayed operations: work that completes when a condition holds or expires after a timeout."""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from datetime import timedelta

from .task import TimerTask

__all__ = ["DelayedOperation"]


class DelayedOperation(TimerTask, metaclass=ABCMeta):
    """An operation with a timeout, completed by an event or by expiry, exactly once.

    Subclass and implement:

    - ``try_complete() -> bool``: check the condition; when it holds, ``return self.force_complete()``;
      otherwise return False. Must be synchronous (no ``await``): check-then-complete is atomic on the
      event-loop thread.
    - ``on_complete()``: runs exactly once per operation, whether it completed or expired.
    - ``on_expiration()``: runs after ``on_complete()``, only when the timeout completed it.

    Rules (all single-threaded):

    - :meth:`force_complete` returns True exactly once over the operation's life, to the caller that
      completed it; every later call (another key's check, the timer's expiry, a re-entrant call from
      ``on_complete``) returns False. It unlinks the operation from its timer in O(1) before calling
      ``on_complete()``.
    - Expiry (the timer running the operation) is ``if force_complete(): on_expiration()``, so an
      operation that completed first never expires, and one that expired never completes again.
    """

    __slots__ = ("completed", "expired")

    def __init__(self, delay_ms: int | timedelta) -> None:
        TimerTask.__init__(self, delay_ms)
        #: True once completed (by its condition or by expiry)
        self.completed = False
        #: True if the timeout completed it (already True while ``on_complete()`` runs on expiry)
        self.expired = False

    def force_complete(self) -> bool:
        """Complete now: True if this call completed the operation, False if it already was."""
        if self.completed:
            return False
        self.completed = True
        self.cancel()
        self.on_complete()
        return True

    @property
    def is_completed(self) -> bool:
        return self.completed

    def run(self) -> None:
        """Timer expiry: complete the operation (``on_complete()``), then ``on_expiration()``."""
        if self.completed:
            return
        self.expired = True  # set first, so on_complete() can tell why it runs
        if self.force_complete():
            self.on_expiration()

    @abstractmethod
    def try_complete(self) -> bool:
        """Complete the operation if its condition holds (``return self.force_complete()``), else False."""

    @abstractmethod
    def on_complete(self) -> None:
        """The completion work; runs exactly once."""

    @abstractmethod
    def on_expiration(self) -> None:
        """Extra work on timeout; runs after ``on_complete()``, only when the timeout fired."""

    def __repr__(self) -> str:
        state = "expired" if self.expired else "completed" if self.completed else (
            "pending" if self.timer_bucket is not None else "new")
        return f"{type(self).__name__}(delay_ms={self.delay_ms}, {state})"
