"""``Stores``: the factory of in-memory stores (names as in Kafka Streams' ``Stores``)."""

from __future__ import annotations

from ..time import Duration
from .key_value import KeyValueStore
from .session import SessionStore
from .versioned import VersionedKeyValueStore
from .window import WindowStore

__all__ = ["Stores"]


class Stores:
    """Create in-memory stores. Durations are int milliseconds or ``timedelta``.

    >>> s = Stores.in_memory_window_store("clicks", retention=60_000, window_size=10_000)
    >>> s.put("alice", 1, 0)
    True
    """

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueStore:
        """An ordered key-value store."""
        return KeyValueStore(name)

    @staticmethod
    def in_memory_window_store(name: str, retention: Duration, window_size: Duration,
                               grace: Duration | None = None, retain_duplicates: bool = False) -> WindowStore:
        """A KIP-428 window store; ``grace`` defaults to ``retention``.

        Raises ValueError, in this order: name empty; retention, window_size or grace negative;
        ``window_size > retention``; ``grace > retention``.
        """
        return WindowStore(name, retention, window_size, grace, retain_duplicates)

    @staticmethod
    def in_memory_session_store(name: str, retention: Duration) -> SessionStore:
        """A KIP-94 session store keeping sessions with ``end >= observed - retention``."""
        return SessionStore(name, retention)

    @staticmethod
    def in_memory_versioned_store(name: str, history_retention: Duration,
                                  segment_interval: Duration | None = None) -> VersionedKeyValueStore:
        """A KIP-889 versioned store (``segment_interval`` default: see ``default_segment_interval``)."""
        return VersionedKeyValueStore(name, history_retention, segment_interval)
