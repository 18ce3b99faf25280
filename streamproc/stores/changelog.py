"""Change-logging wrappers: record every mutation of a store as a changelog record.

The in-memory stores know nothing of Kafka. :func:`change_logged` wraps a store in a
``ChangeLogging*Store`` with the same read and write methods; each applied write also becomes a
:class:`~streamproc.stores.changelog_format.ChangelogRecord` in a write buffer that the runtime
drains at commit time:

- the key and value are serialised *before* the store is touched, so a serde error leaves the
  store unchanged; writes the store drops (late/expired, ``NOT_PUT``) produce no record;
- ``drain()`` returns the pending records in first-write order and empties the buffer. Key-value,
  window and session records are de-duplicated per changelog key (the last write wins, at the
  position of the first); a window store with duplicates gives every put its own sequence number,
  so nothing merges; versioned stores keep one record per (key, version timestamp); a session
  store leaves out the puts of sessions that expired before the drain (a restore drops them too);
- record timestamps: key-value, window and session records use the timestamp of the record being
  processed (the ``timestamp=`` keyword of a write, else the last :meth:`set_record_timestamp`),
  falling back to the store's ``observed_stream_time``; versioned records carry the version
  timestamp;
- ``restore(records)`` replays changelog records (oldest first) into the inner store through the
  same put rules (the inner store's ``import_records``), without logging them again. Replaying the
  drained records of a store rebuilds its contents and its observed stream time (whenever the latter
  is visible in the log).

The wrappers use only the public interface of the inner stores: their reads and writes,
``import_records`` (restore), ``observed_stream_time`` and, for sessions, the session-entry
operations (``find_mergeable``, ``replace_sessions``, ``session_entries``, ``last_write_created``).

With ``key_serde``/``value_serde`` None the wrapper uses JSON (keys with
:data:`~streamproc.serde.JSON_KEY`, so tuple keys come back as tuples).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from ..records import Windowed
from ..serde import JSON, JSON_KEY, Serde
from ._checks import check_int, check_optional_int
from .changelog_format import (
    ChangelogRecord,
    changelog_topic_config,
    session_key_suffix,
    split_session_changelog_key,
    split_window_changelog_key,
    window_changelog_key,
)
from .key_value import KeyValueStore
from .session import SessionStore
from .versioned import NOT_PUT, VersionedKeyValueStore, VersionedRecord
from .window import WindowStore

__all__ = [
    "ChangeLoggingKeyValueStore",
    "ChangeLoggingSessionStore",
    "ChangeLoggingVersionedStore",
    "ChangeLoggingWindowStore",
    "ChangelogRecord",
    "change_logged",
    "changelog_topic_config",
]

_SEQ_MASK = 0x7FFFFFFF
_END_START = session_key_suffix
_END = struct.Struct(">q")               # the end in a session changelog key (16 bytes from its end)
_LOWEST_END = -(1 << 63)
_record = tuple.__new__                  # ChangelogRecord without the NamedTuple __new__ wrapper
_INT_MEMO_SIZE = 4096                    # distinct int values whose serialised bytes are kept
_KEY_MEMO_SIZE = 1 << 16                 # distinct str keys whose serialised bytes are kept


class _ChangeLogging:
    """What every change-logging wrapper shares: the buffer, serdes, timestamps and delegation."""

    kind: str = ""

    def __init__(self, inner: Any, key_serde: Serde | None, value_serde: Serde | None,
                 topic: str | None) -> None:
        self.inner = inner
        self.name: str = inner.name
        self.changelog_topic: str = topic if topic else f"{inner.name}-changelog"
        self.key_serde: Serde = key_serde if key_serde is not None else JSON_KEY
        self.value_serde: Serde = value_serde if value_serde is not None else JSON
        self._where = f"changelog {self.changelog_topic!r} of {inner.kind.replace('_', '-')} store {inner.name!r}"
        self._pending: dict[Any, ChangelogRecord] = {}
        self._record_ts: int | None = None
        self._int_bytes: dict[int, bytes | None] = {}
        self._str_key_bytes: dict[str, bytes] = {}

    # -- serialisation helpers --------------------------------------------------------------
    def _key_bytes(self, key: Any) -> bytes:
        """The serialised key; ``str`` keys (exactly str: equal keys of other types may serialise
        differently, e.g. ``1`` and ``True``) are serialised once per distinct key (memo)."""
        if type(key) is str:
            memo = self._str_key_bytes
            data = memo.get(key)
            if data is None:
                data = self.key_serde.serialize(key, self._where)  # type: ignore[assignment]
                if len(memo) >= _KEY_MEMO_SIZE:
                    memo.clear()
                memo[key] = data  # type: ignore[assignment]
            return data  # type: ignore[return-value]
        if key is None:
            raise ValueError(f"{self._where}: key must not be None")
        return self.key_serde.serialize(key, self._where)  # type: ignore[return-value]

    def _value_bytes(self, value: Any) -> bytes | None:
        if type(value) is int:  # counts and the like: serialised once per distinct value (memo)
            memo = self._int_bytes
            data = memo.get(value)
            if data is None:
                data = self.value_serde.serialize(value, self._where)
                if len(memo) >= _INT_MEMO_SIZE:
                    memo.clear()
                memo[value] = data
            return data
        return self.value_serde.serialize(value, self._where)

    def _ts(self, timestamp: int | None) -> int:
        if timestamp is not None:
            if type(timestamp) is not int:
                return check_int(self._where, "timestamp", timestamp)
            return timestamp
        record_ts = self._record_ts
        return record_ts if record_ts is not None else self.inner.observed_stream_time

    # -- the write buffer -------------------------------------------------------------------
    def set_record_timestamp(self, timestamp: int | None) -> None:
        """The timestamp of the record being processed (used for the next changelog records)."""
        self._record_ts = check_optional_int(self._where, "timestamp", timestamp)

    def drain(self) -> list[ChangelogRecord]:
        """The changelog records pending since the last drain (de-duplicated), oldest first."""
        pending = self._pending
        if not pending:
            return []
        self._pending = {}
        return list(pending.values())

    @property
    def pending_changelog_records(self) -> int:
        return len(self._pending)

    def topic_config(self) -> dict[str, str]:
        """The configs to create this store's changelog topic with."""
        return changelog_topic_config(self.inner)

    # -- delegated state --------------------------------------------------------------------
    @property
    def observed_stream_time(self) -> int:
        return self.inner.observed_stream_time  # type: ignore[no-any-return]

    @property
    def dropped_records(self) -> int:
        return self.inner.dropped_records  # type: ignore[no-any-return]

    @property
    def approximate_num_entries(self) -> int:
        return self.inner.approximate_num_entries  # type: ignore[no-any-return]

    @property
    def is_open(self) -> bool:
        return self.inner.is_open  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self.inner)

    def close(self) -> None:
        """Close the inner store and discard records not drained yet."""
        self._pending = {}
        self.inner.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, topic={self.changelog_topic!r})"

    def restore(self, records: Iterable[Any]) -> int:
        """Replay ``records`` (objects with ``.key .value .timestamp``, oldest first) into the inner
        store through its ``import_records`` (the put rules); nothing is logged. Returns the number
        of records. Records are decoded one at a time, each just before it is put."""
        return self.inner.import_records(self._decoded(records))  # type: ignore[no-any-return]

    def _decoded(self, records: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
        """The inner store's import records (arguments of its ``put``) of changelog ``records``."""
        raise TypeError(f"{type(self).__name__} cannot restore")  # overridden by every wrapper

    def _deserialize_key(self, data: bytes) -> Any:
        return self.key_serde.deserialize(data, self._where)

    def _deserialize_value(self, data: bytes | None) -> Any:
        return self.value_serde.deserialize(data, self._where)


class ChangeLoggingKeyValueStore(_ChangeLogging):
    """A :class:`KeyValueStore` whose writes are change-logged (record key = key bytes)."""

    kind = "key_value"
    inner: KeyValueStore
    get: Callable[[Any], Any]
    range: Callable[..., Any]
    all: Callable[..., Any]
    count: Callable[[], int]

    def __init__(self, inner: KeyValueStore, key_serde: Serde | None = None,
                 value_serde: Serde | None = None, topic: str | None = None) -> None:
        super().__init__(inner, key_serde, value_serde, topic)
        self.get = inner.get
        self.range = inner.range
        self.all = inner.all
        self.count = inner.count

    def __contains__(self, key: Any) -> bool:
        return key in self.inner

    def put(self, key: Any, value: Any, timestamp: int | None = None) -> None:
        """``inner.put(key, value)`` and log it (``None`` logs a tombstone)."""
        kb = self._key_bytes(key)
        vb = self._value_bytes(value)
        self.inner.put(key, value)
        self._pending[kb] = ChangelogRecord(kb, vb, self._ts(timestamp))

    def put_if_absent(self, key: Any, value: Any, timestamp: int | None = None) -> Any:
        """Store and log ``value`` only when ``key`` has no value; return the previous value."""
        old = self.inner.get(key)
        if old is None and value is not None:
            self.put(key, value, timestamp)
        return old

    def put_all(self, entries: Iterable[tuple[Any, Any]], timestamp: int | None = None) -> None:
        """``put`` each ``(key, value)`` in order."""
        for key, value in entries:
            self.put(key, value, timestamp)

    def delete(self, key: Any, timestamp: int | None = None) -> Any:
        """``inner.delete(key)`` and log a tombstone; return the previous value."""
        kb = self._key_bytes(key)
        old = self.inner.delete(key)
        self._pending[kb] = ChangelogRecord(kb, None, self._ts(timestamp))
        return old

    def _decoded(self, records: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        key_of = self._deserialize_key
        value_of = self._deserialize_value
        for record in records:
            yield key_of(record.key), value_of(record.value)


class ChangeLoggingWindowStore(_ChangeLogging):
    """A :class:`WindowStore` whose applied puts are change-logged (key bytes + start [+ seq])."""

    kind = "window"
    inner: WindowStore
    get: Callable[[Any, int], Any]
    fetch: Callable[..., Any]
    fetch_keys: Callable[..., Any]
    fetch_all: Callable[..., Any]
    all: Callable[..., Any]

    def __init__(self, inner: WindowStore, key_serde: Serde | None = None,
                 value_serde: Serde | None = None, topic: str | None = None) -> None:
        super().__init__(inner, key_serde, value_serde, topic)
        self.get = inner.get
        self.fetch = inner.fetch
        self.fetch_keys = inner.fetch_keys
        self.fetch_all = inner.fetch_all
        self.all = inner.all
        self._seq = 0

    @property
    def retention(self) -> int:
        return self.inner.retention

    @property
    def window_size(self) -> int:
        return self.inner.window_size

    @property
    def grace(self) -> int:
        return self.inner.grace

    @property
    def retain_duplicates(self) -> bool:
        return self.inner.retain_duplicates

    def put(self, key: Any, value: Any, window_start: int, timestamp: int | None = None) -> bool:
        """``inner.put(...)``; an applied put is logged, a dropped one is not (except that a dropped
        put which advanced the observed time, possible only with grace 0, logs a tombstone for its
        window, so a restore reaches the same time). Returns ``inner.put``'s result."""
        kb = self._key_bytes(key)
        vb = self._value_bytes(value)
        inner = self.inner
        observed = inner.observed_stream_time
        applied = inner.put(key, value, window_start)
        if not applied:
            if inner.observed_stream_time == observed:
                return False
            vb = None
        if inner.retain_duplicates:
            seq = self._seq = (self._seq + 1) & _SEQ_MASK
            ck = window_changelog_key(kb, window_start, seq)
        else:
            ck = window_changelog_key(kb, window_start)
        self._pending[ck] = ChangelogRecord(ck, vb, self._ts(timestamp))
        return applied

    def _decoded(self, records: Iterable[Any]) -> Iterator[tuple[Any, Any, int]]:
        dups = self.inner.retain_duplicates
        where = self._where
        key_of = self._deserialize_key
        value_of = self._deserialize_value
        for record in records:
            kb, start, seq = split_window_changelog_key(record.key, dups, where)
            yield key_of(kb), value_of(record.value), start
            if seq is not None:  # (resumed once the record was put)
                self._seq = seq


class ChangeLoggingSessionStore(_ChangeLogging):
    """A :class:`SessionStore` whose applied writes are change-logged (key bytes + end + start).

    Session aggregation's :meth:`replace_sessions` is a write cache in one more respect: a session
    created since the last drain and merged away again before the next one (a session growing
    click by click) never reaches the changelog - neither its put nor its tombstone - because no
    reader of the changelog could have seen it. It is elided only when the session that replaces
    it is stored and ends no earlier (always so in the session aggregate), so a restore reaches
    the same contents and observed stream time. A key that already had a
    pending record when it was created (a tombstone to deliver) is not elided, nor is anything
    written through ``put``/``remove``.
    """

    kind = "session"  # (no class-level annotations: compiled, the fields are declared in changelog.pxd)

    def __init__(self, inner: SessionStore, key_serde: Serde | None = None,
                 value_serde: Serde | None = None, topic: str | None = None) -> None:
        super().__init__(inner, key_serde, value_serde, topic)
        self.find_sessions = inner.find_sessions
        self.fetch_session = inner.fetch_session
        self.fetch = inner.fetch
        self.fetch_keys = inner.fetch_keys
        self.all = inner.all
        self.find_mergeable = inner.find_mergeable    # reads: the inner store's (see SessionStore)
        self.session_entries = inner.session_entries
        # changelog keys created by replace_sessions since the last drain, with no record drained before
        self._fresh: set[bytes] = set()

    @property
    def retention(self) -> int:
        return self.inner.retention

    def _log(self, session: Any, agg: Any, is_put: bool, timestamp: int | None) -> bool:
        inner = self.inner
        key, start, end = inner.unpack_session(session)
        kb = self._key_bytes(key)
        vb = self._value_bytes(agg)
        if not is_put and inner.fetch_session(key, start, end) is None:
            # remove of a session the store does not hold: nothing to log (a tombstone would be
            # restored as put(session, None), which advances the observed time; remove does not)
            return inner.remove(session)
        if not (inner.put(session, agg) if is_put else inner.remove(session)):
            return False
        ck = kb + _END_START(end, start)
        self._pending[ck] = _record(ChangelogRecord, (ck, vb, self._ts(timestamp)))
        if self._fresh:
            self._fresh.discard(ck)
        return True

    def drain(self) -> list[ChangelogRecord]:
        """The pending records (see :meth:`_ChangeLogging.drain`) minus those storing a session that
        has expired since (``end < observed - retention``): a restore could not keep it either.

        A restore still reaches the same contents and observed stream time: the record that set the
        observed time ends at it and stays, and a session ending before ``observed - retention`` is
        expired at the end of a restore whether or not its put was replayed. (With a drain every
        commit interval and sessions that open and close within one, this keeps most session
        records off the changelog.)"""
        self._fresh = set()
        records = super().drain()
        inner = self.inner
        cutoff = inner.observed_stream_time - inner.retention
        if not records or cutoff <= _LOWEST_END:
            return records
        unpack_end = _END.unpack_from
        return [r for r in records if r[1] is None or unpack_end(r[0], len(r[0]) - 16)[0] >= cutoff]

    def close(self) -> None:
        self._fresh = set()
        super().close()

    def replace_sessions(self, key: Any, removed: Sequence[list[Any]], start: int, end: int,
                         agg: Any) -> list[Any] | None:
        """``inner.replace_sessions(...)`` (same arguments, result and contract, see
        :class:`SessionStore`), logged exactly like the equivalent ``remove``/``put`` calls: a
        tombstone per removed session (timestamped before the put), then the put's record; minus
        the sessions this write cache elides (see the class docstring)."""
        inner = self.inner
        kb = self._key_bytes(key)
        vb = self._value_bytes(agg)
        record_ts = self._record_ts
        pending = self._pending
        fresh = self._fresh
        elided: list[bytes] | None = None
        if removed:
            before = record_ts if record_ts is not None else inner.observed_stream_time
            tombstones = [kb + _END_START(e[0], e[1]) for e in removed]  # type: ignore[operator]
            last_end = removed[-1][0]  # (read before replace_sessions: it may extend that entry)
            entry = inner.replace_sessions(key, removed, start, end, agg)
            # a session created since the last drain never reaches the changelog, provided the
            # put is logged and ends no earlier (its record then restores the observed time the
            # elided session had advanced); removed entries come from find_mergeable, ordered by end
            absorbed = entry is not None and end >= last_end
            for ck in tombstones:
                if ck in fresh:
                    fresh.discard(ck)
                    if absorbed:
                        del pending[ck]
                        elided = [ck] if elided is None else elided + [ck]
                        continue
                pending[ck] = _record(ChangelogRecord, (ck, None, before))
        else:
            entry = inner.replace_sessions(key, removed, start, end, agg)
        if entry is not None:
            ck = kb + _END_START(end, start)  # type: ignore[operator]
            # fresh: a window the store did not hold (or held only since the last drain), with no
            # record pending for it (a pending tombstone must still be delivered)
            if ck not in pending and (inner.last_write_created or (elided is not None and ck in elided)):
                fresh.add(ck)
            pending[ck] = _record(ChangelogRecord, (ck, vb, record_ts if record_ts is not None
                                                        else inner.observed_stream_time))
        return entry

    def put(self, session: Windowed, agg: Any, timestamp: int | None = None) -> bool:
        """``inner.put(session, agg)`` and log it (``None`` logs a tombstone)."""
        return self._log(session, agg, True, timestamp)

    def remove(self, session: Windowed, timestamp: int | None = None) -> bool:
        """``inner.remove(session)`` and log a tombstone."""
        return self._log(session, None, False, timestamp)

    def _decoded(self, records: Iterable[Any]) -> Iterator[tuple[Windowed, Any]]:
        where = self._where
        key_of = self._deserialize_key
        value_of = self._deserialize_value
        for record in records:
            kb, start, end = split_session_changelog_key(record.key, where)
            yield Windowed(key_of(kb), start, end), value_of(record.value)


class ChangeLoggingVersionedStore(_ChangeLogging):
    """A :class:`VersionedKeyValueStore` whose stored versions are change-logged.

    Record key = key bytes, record timestamp = version timestamp; one record per (key, timestamp).
    """

    kind = "versioned"
    inner: VersionedKeyValueStore
    get: Callable[..., VersionedRecord | None]
    versions: Callable[[Any], list[VersionedRecord]]
    keys: Callable[[], list[Any]]

    def __init__(self, inner: VersionedKeyValueStore, key_serde: Serde | None = None,
                 value_serde: Serde | None = None, topic: str | None = None) -> None:
        super().__init__(inner, key_serde, value_serde, topic)
        self.get = inner.get
        self.versions = inner.versions
        self.keys = inner.keys

    @property
    def history_retention(self) -> int:
        return self.inner.history_retention

    @property
    def segment_interval(self) -> int:
        return self.inner.segment_interval

    def put(self, key: Any, value: Any, timestamp: int) -> int:
        """``inner.put(key, value, timestamp)``; a stored version is logged at its timestamp."""
        kb = self._key_bytes(key)
        vb = self._value_bytes(value)
        result = self.inner.put(key, value, timestamp)
        if result != NOT_PUT:
            self._pending[(kb, timestamp)] = ChangelogRecord(kb, vb, int(timestamp))
        return result

    def delete(self, key: Any, timestamp: int) -> VersionedRecord | None:
        """``inner.delete(key, timestamp)``; the tombstone is logged when it was stored."""
        inner = self.inner
        timestamp = check_int(self._where, "timestamp", timestamp)
        kb = self._key_bytes(key)
        stored = timestamp >= inner.observed_stream_time - inner.history_retention
        old = inner.delete(key, timestamp)
        if stored:
            self._pending[(kb, timestamp)] = ChangelogRecord(kb, None, timestamp)
        return old

    def _decoded(self, records: Iterable[Any]) -> Iterator[tuple[Any, Any, int]]:
        where = self._where
        key_of = self._deserialize_key
        value_of = self._deserialize_value
        for record in records:
            timestamp = record.timestamp
            if type(timestamp) is not int:
                timestamp = check_int(where, "record timestamp", timestamp)
            yield key_of(record.key), value_of(record.value), timestamp


ChangeLoggingStore = (ChangeLoggingKeyValueStore | ChangeLoggingWindowStore | ChangeLoggingSessionStore
                      | ChangeLoggingVersionedStore)

_WRAPPERS: dict[str, type[_ChangeLogging]] = {
    "key_value": ChangeLoggingKeyValueStore,
    "window": ChangeLoggingWindowStore,
    "session": ChangeLoggingSessionStore,
    "versioned": ChangeLoggingVersionedStore,
}


def change_logged(store: Any, key_serde: Serde | None = None, value_serde: Serde | None = None,
                  topic: str | None = None) -> Any:
    """Wrap ``store`` so its writes are change-logged to ``topic`` (default ``<name>-changelog``).

    ``key_serde``/``value_serde`` None means JSON. Wrapping a wrapper is an error.
    """
    if isinstance(store, _ChangeLogging):
        raise TypeError(f"store {store.name!r} is already change-logged (topic {store.changelog_topic!r})")
    wrapper = _WRAPPERS.get(getattr(store, "kind", ""))
    if wrapper is None:
        raise TypeError(f"change_logged needs a store from Stores, got {type(store).__name__} {store!r}")
    for arg, serde in (("key_serde", key_serde), ("value_serde", value_serde)):
        if serde is not None and not isinstance(serde, Serde):
            raise TypeError(f"change_logged({store.name!r}): {arg} must be a Serde or None, got {serde!r}")
    if topic is not None and (not isinstance(topic, str) or not topic):
        raise ValueError(f"change_logged({store.name!r}): topic must be a non-empty str or None, got {topic!r}")
    return wrapper(store, key_serde, value_serde, topic)
