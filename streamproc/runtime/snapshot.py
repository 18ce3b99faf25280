"""Local snapshots of task state: written on clean shutdown, validated and loaded at restore.

A snapshot of one change-logged store is its **contents as changelog records** (the same key and
value bytes the change-logging wrapper writes, docs/stores.md) plus the changelog offset the
contents correspond to. The contents come from the store's ``export_records()`` (the arguments of
its ``put``, in an order that rebuilds it), serialised as changelog records; restoring a snapshot
is ``store.restore(records)`` (the store's ``import_records``, through its own put rules), then
replaying the changelog from that offset to the end offset read at restore start. A snapshot
written by another version of a store class still loads (it holds bytes, not objects).

Layout under ``state_dir`` (one directory per application id)::

    <state_dir>/<application_id>/.lock              flock held while an app instance runs
    <state_dir>/<application_id>/instance.id        stable instance id (names the transactional producer)
    <state_dir>/<application_id>/snapshots/<changelog topic>-<partition>.snapshot

A snapshot file is ``MAGIC``, one line of JSON (the header) and a ``marshal`` payload: a list of
``(key bytes, value bytes | None, timestamp)``. The header names the application, the changelog
topic and partition, the store's name and kind, the changelog ``offset`` (the end offset of the
changelog partition after the final commit: everything below it is in the snapshot), the store's
observed stream time, the record count and the payload's CRC-32. Files are written to a temporary
name, fsync'ed and renamed, so a crash never leaves a half-written snapshot under the real name.

Validation at load (:meth:`Snapshots.load`), each failure a WARNING naming the values and a full
replay from the log start instead:

- the file parses, its CRC matches, it names this application, topic, partition and store kind;
- ``log_start <= offset <= log_end`` for the changelog partition's offsets read at restore start
  (an offset beyond the end means the topic was truncated or recreated; below the start means the
  records after the snapshot were deleted by retention);
- a snapshot older than :data:`MAX_AGE_WITH_GAP_MS` (24 h, Kafka's default ``delete.retention.ms``)
  is used only when no record was written after it (``offset == log_end``): tombstones written
  since may already be compacted away;
- replaying the records gives the recorded stream time (or can be brought to it with a no-op
  write, for window and session stores).

Snapshots are kept after a load: a snapshot at offset ``o`` plus the changelog from ``o`` is the
store's state whatever happened later, as long as the offsets validate. They are rewritten at every
clean shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import gc
import json
import logging
import marshal
import os
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiokafka import TopicPartition

from ..config import Config
from ..errors import StreamprocError
from ..records import Windowed
from ..stores.changelog_format import (
    changelog_records,
    session_changelog_key,
    split_session_changelog_key,
    split_window_changelog_key,
    window_changelog_key,
)
from .tasks import ManagedTask

__all__ = [
    "FORMAT_VERSION",
    "MAX_AGE_WITH_GAP_MS",
    "SnapshotError",
    "SnapshotHeader",
    "Snapshots",
    "StateDirLockedError",
    "export_records",
    "read_snapshot",
    "write_snapshot",
]

log = logging.getLogger("streamproc.snapshot")

MAGIC = b"STREAMPROC-SNAPSHOT\n"
FORMAT_VERSION = 1
#: A snapshot older than this is used only when the changelog has nothing after it (Kafka's default
#: ``delete.retention.ms``: tombstones written after the snapshot may be compacted away by then).
MAX_AGE_WITH_GAP_MS = 24 * 60 * 60 * 1000
#: Records applied per step while loading (the loop gets control back in between).
_CHUNK = 20_000


class SnapshotError(StreamprocError):
    """A snapshot file is unreadable or does not fit; the message says why (with the values)."""


class StateDirLockedError(StreamprocError):
    """Another running instance holds the application's state directory."""


@dataclass(frozen=True)
class SnapshotHeader:
    """What a snapshot file says about itself (see the module docstring)."""

    application_id: str
    topic: str
    partition: int
    store: str
    kind: str
    offset: int
    observed_stream_time: int
    replay_stream_time: int
    records: int
    crc32: int
    created_ms: int
    format: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        return json.dumps(self.__dict__, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes) -> SnapshotHeader:
        fields = json.loads(data)
        if not isinstance(fields, dict):
            raise SnapshotError(f"header is not a JSON object: {data[:80]!r}")
        try:
            return cls(**fields)
        except TypeError as exc:
            raise SnapshotError(f"header fields do not match format {FORMAT_VERSION}: {exc}") from None


# ------------------------------------------------------------------------------------------------
# Store contents <-> changelog records


def export_records(store: Any, deadline: float | None = None) -> tuple[list[tuple[bytes, bytes | None, int]], int]:
    """The contents of the change-logging ``store`` as changelog records ``(key, value, timestamp)``
    in an order that rebuilds them through the put rules (the inner store's ``export_records()``),
    and the stream time that replaying them gives (to compare with the store's own).

    Key-value: key order. Window: by start, then key (duplicates numbered 1, 2, ... in the order
    they are exported). Session: by end, then key, then start. Versioned: every stored version,
    tombstones included, by version timestamp (so no version is older than history retention when
    it is replayed).

    ``deadline`` (``time.monotonic()`` value): past it, :class:`SnapshotError` is raised (checked
    every 65536 entries).
    """
    inner = store.inner
    limit = float("inf") if deadline is None else deadline

    def check(n: int) -> None:
        if not n & 0xFFFF and time.monotonic() > limit:
            raise SnapshotError(f"out of time after {n} entries of store {inner.name!r}")

    kind = inner.kind
    key_ser = store.key_serde.serialize
    val_ser = store.value_serde.serialize
    where = f"snapshot of store {inner.name!r}"
    out: list[tuple[bytes, bytes | None, int]] = []
    append = out.append
    replay_time = -1
    observed = inner.observed_stream_time
    if kind not in ("key_value", "window", "session", "versioned"):
        raise SnapshotError(f"store {inner.name!r} has unknown kind {kind!r}")
    exported = inner.export_records()
    if kind == "key_value":
        for key, value in exported:
            check(len(out))
            append((key_ser(key, where), val_ser(value, where), observed))
    elif kind == "window":
        dups = inner.retain_duplicates
        seq = 0
        for key, value, start in exported:
            check(len(out))
            kb = key_ser(key, where)
            if dups:
                seq += 1
                ck = window_changelog_key(kb, start, seq)
            else:
                ck = window_changelog_key(kb, start)
            append((ck, val_ser(value, where), observed))
            replay_time = max(replay_time, start)
    elif kind == "session":
        for w, agg in exported:
            check(len(out))
            append((session_changelog_key(key_ser(w.key, where), w.end, w.start), val_ser(agg, where), observed))
            replay_time = max(replay_time, w.end)
    else:  # versioned: by version timestamp, so the last one sets the replayed stream time
        for key, value, ts in exported:
            check(len(out))
            append((key_ser(key, where), None if value is None else val_ser(value, where), ts))
        if out:
            replay_time = out[-1][2]
    return out, replay_time


def _stream_time_fixup(store: Any, records: list[tuple[bytes, bytes | None, int]], observed: int) -> None:
    """Advance a window or session store to ``observed`` with a write that changes no contents:
    deleting a key from the window (or the session ``[observed, observed]``) where it has no value.
    Only called when replaying ``records`` gives a smaller stream time (the newest window/session
    was deleted), so that window/session cannot hold the key."""
    inner = store.inner
    kb = records[0][0]
    where = f"snapshot of store {inner.name!r}"
    if inner.kind == "window":
        key_bytes, _, _ = split_window_changelog_key(kb, inner.retain_duplicates, where)
        inner.put(store.key_serde.deserialize(key_bytes, where), None, observed)
    else:
        key_bytes, _, _ = split_session_changelog_key(kb, where)
        # put(session, None), not remove: only a put advances the observed time
        inner.put(Windowed(store.key_serde.deserialize(key_bytes, where), observed, observed), None)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a store is bulk-exported or -loaded (bounded work
    that allocates only acyclic objects); reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# ------------------------------------------------------------------------------------------------
# Files


def write_snapshot(path: Path, header: SnapshotHeader, payload: bytes) -> None:
    """Write atomically: temporary file, fsync, rename, fsync the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(MAGIC)
        f.write(header.to_json())
        f.write(b"\n")
        f.write(payload)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    with contextlib.suppress(OSError):
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read_snapshot(path: Path) -> tuple[SnapshotHeader, list[tuple[bytes, bytes | None, int]]]:
    """Parse and check a snapshot file (magic, header, CRC, record count); SnapshotError if bad."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(f"cannot read {path}: {exc}") from None
    if not data.startswith(MAGIC):
        raise SnapshotError(f"{path} is not a streamproc snapshot (bad magic)")
    nl = data.find(b"\n", len(MAGIC))
    if nl < 0:
        raise SnapshotError(f"{path}: header is not terminated")
    try:
        header = SnapshotHeader.from_json(data[len(MAGIC):nl])
    except ValueError as exc:
        raise SnapshotError(f"{path}: header is not valid JSON: {exc}") from None
    if header.format != FORMAT_VERSION:
        raise SnapshotError(f"{path}: format {header.format}, this version reads {FORMAT_VERSION}")
    payload = memoryview(data)[nl + 1:]
    crc = zlib.crc32(payload)
    if crc != header.crc32:
        raise SnapshotError(f"{path}: payload CRC-32 {crc:#010x} != {header.crc32:#010x} in the header (corrupt)")
    try:
        records = marshal.loads(payload)
    except (EOFError, ValueError, TypeError) as exc:
        raise SnapshotError(f"{path}: payload does not decode: {exc}") from None
    if not isinstance(records, list) or len(records) != header.records:
        got = len(records) if isinstance(records, list) else type(records).__name__
        raise SnapshotError(f"{path}: payload holds {got} records, header says {header.records}")
    return header, records


# ------------------------------------------------------------------------------------------------
# The manager


class Snapshots:
    """Snapshots and the instance id of one application under ``state_dir``.

    :meth:`lock` (at app start) takes an exclusive ``flock`` on the application's directory, so
    two instances never share snapshots or an instance id; :meth:`unlock` releases it.
    """

    def __init__(self, state_dir: str | os.PathLike[str], application_id: str) -> None:
        self.application_id = application_id
        self.root = Path(state_dir).expanduser() / application_id
        self.dir = self.root / "snapshots"
        self._lock_fd: int | None = None
        self.loaded: dict[TopicPartition, int] = {}
        self.rejected: dict[TopicPartition, str] = {}
        self.saved: dict[TopicPartition, int] = {}

    # ---- directory lock and instance id --------------------------------------------------------

    def lock(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / ".lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StateDirLockedError(
                f"state_dir {str(self.root.parent)!r} is in use by another running instance of application "
                f"{self.application_id!r} (lock {str(path)!r}); give each instance its own state_dir") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._lock_fd = fd

    def unlock(self) -> None:
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            os.close(self._lock_fd)
            self._lock_fd = None

    def instance_id(self) -> str:
        """A stable id for this instance (created once, then read back): restarts reuse it, so the
        transactional producer of a restarted instance fences and aborts its predecessor's open
        transaction at once."""
        path = self.root / "instance.id"
        with contextlib.suppress(OSError):
            text = path.read_text().strip()
            if text:
                return text
        self.root.mkdir(parents=True, exist_ok=True)
        new = uuid.uuid4().hex[:16]
        tmp = path.with_name("instance.id.tmp")
        tmp.write_text(new + "\n")
        os.replace(tmp, path)
        return new

    def path_for(self, tp: TopicPartition) -> Path:
        return self.dir / f"{tp.topic}-{tp.partition}.snapshot"

    # ---- save ------------------------------------------------------------------------------------

    async def save(self, stores: Mapping[TopicPartition, Any], offsets: Mapping[TopicPartition, int],
                   deadline: float | None = None) -> int:
        """Write a snapshot of each change-logging store in ``stores`` (changelog partition -> store)
        at ``offsets[tp]``; returns the number of files written. Errors are logged, not raised.
        Past ``deadline`` (``time.monotonic()``) the remaining snapshots are skipped (their old files,
        if any, stay valid or are rejected at load by their offsets)."""
        written = 0
        for tp, store in stores.items():
            offset = offsets.get(tp)
            if offset is None:
                continue
            started = time.perf_counter()
            try:
                with _gc_paused():
                    records, replay_time = export_records(store, deadline)
                await asyncio.sleep(0)
                payload = marshal.dumps(records)
                header = SnapshotHeader(
                    application_id=self.application_id, topic=tp.topic, partition=tp.partition,
                    store=store.inner.name, kind=store.inner.kind, offset=offset,
                    observed_stream_time=store.inner.observed_stream_time, replay_stream_time=replay_time,
                    records=len(records), crc32=zlib.crc32(payload), created_ms=int(time.time() * 1000))
                write_snapshot(self.path_for(tp), header, payload)
            except Exception as exc:  # noqa: BLE001 - a snapshot is an optimisation: never fail a stop
                log.warning("snapshot of %s[%d] not written: %s: %s", tp.topic, tp.partition, type(exc).__name__, exc)
                continue
            written += 1
            self.saved[tp] = offset
            log.info("snapshot of %s[%d] written: %d records at changelog offset %d (%d bytes, %.2f s)",
                     tp.topic, tp.partition, len(records), offset, len(payload), time.perf_counter() - started)
        return written

    # ---- load ------------------------------------------------------------------------------------

    async def load(self, task: Any, tp: TopicPartition, store: Any, log_start: int, log_end: int) -> int:
        """Load the snapshot of changelog partition ``tp`` into ``store`` if there is one and it
        fits ``[log_start, log_end]``; return the changelog offset to replay from (``log_start``
        when no snapshot was used)."""
        path = self.path_for(tp)
        if not path.exists():
            return log_start
        where = f"task {task}: snapshot {str(path)!r} of {tp.topic}[{tp.partition}]"
        try:
            header, records = read_snapshot(path)
            self._check(header, tp, store, log_start, log_end)
            fixup = header.replay_stream_time < header.observed_stream_time
            if fixup and (store.inner.kind not in ("window", "session") or not records):
                raise SnapshotError(
                    f"replaying it gives stream time {header.replay_stream_time}, not the recorded "
                    f"{header.observed_stream_time}, and a {store.inner.kind} store cannot be advanced without a write")
        except SnapshotError as exc:
            self.rejected[tp] = str(exc)
            log.warning("%s ignored: %s; full restore from offset %d", where, exc, log_start)
            return log_start
        if len(store) != 0:
            log.warning("%s ignored: the store is not empty (%d entries)", where, len(store))
            return log_start
        started = time.perf_counter()
        try:
            with _gc_paused():  # millions of new long-lived objects: collections would rescan them all
                for i in range(0, len(records), _CHUNK):
                    store.restore(changelog_records(records[i:i + _CHUNK]))
                    await asyncio.sleep(0)
            if fixup:
                _stream_time_fixup(store, records, header.observed_stream_time)
            if store.inner.observed_stream_time != header.observed_stream_time:
                raise SnapshotError(f"after loading, stream time is {store.inner.observed_stream_time}, the "
                                    f"snapshot recorded {header.observed_stream_time}")
        except Exception as exc:
            # the store is half loaded: fail loudly; the file is set aside so the next start restores
            # from the changelog alone instead of failing again
            bad = path.with_name(path.name + ".bad")
            with contextlib.suppress(OSError):
                os.replace(path, bad)
            raise SnapshotError(f"{where} could not be loaded ({type(exc).__name__}: {exc}); moved to "
                                f"{str(bad)!r}, the next start restores from the changelog") from exc
        self.loaded[tp] = header.offset
        log.info("%s loaded: %d records at offset %d in %.2f s; replaying %d changelog records (%d..%d)",
                 where, len(records), header.offset, time.perf_counter() - started, log_end - header.offset,
                 header.offset, log_end)
        return header.offset

    def _check(self, h: SnapshotHeader, tp: TopicPartition, store: Any, log_start: int, log_end: int) -> None:
        if h.application_id != self.application_id:
            raise SnapshotError(f"it belongs to application {h.application_id!r}, not {self.application_id!r}")
        if (h.topic, h.partition) != (tp.topic, tp.partition):
            raise SnapshotError(f"it is of {h.topic}[{h.partition}]")
        if h.kind != store.inner.kind or h.store != store.inner.name:
            raise SnapshotError(f"it is of {h.kind} store {h.store!r}, the task has {store.inner.kind} store "
                                f"{store.inner.name!r}")
        if h.offset > log_end:
            raise SnapshotError(f"its offset {h.offset} is beyond the changelog's end offset {log_end} "
                                f"(the topic was truncated or recreated)")
        if h.offset < log_start:
            raise SnapshotError(f"its offset {h.offset} is below the changelog's log-start offset {log_start} "
                                f"(records after it were deleted)")
        age = int(time.time() * 1000) - h.created_ms
        if h.offset < log_end and age > MAX_AGE_WITH_GAP_MS:
            raise SnapshotError(f"it is {age // 3_600_000} h old and {log_end - h.offset} changelog records follow "
                                f"it (tombstones among them may have been compacted away)")


async def save_on_shutdown(tasks: Iterable[ManagedTask], tracker: Any, config: Config, snapshots: Snapshots) -> int:
    """After the final commit: snapshot every one of ``tasks`` (running, not failed) whose changelog
    writes are all acknowledged (``tracker``: the ack tracker), at the changelog partitions' current
    end offsets. Returns files written."""
    from aiokafka import AIOKafkaConsumer

    stores: dict[TopicPartition, Any] = {}
    for mt in tasks:
        if any(tracker.failure(tp) is not None or tracker.pending_sends(tp) for tp in mt.inputs):
            log.info("task %s: no snapshot (sends not all acknowledged)", mt.id)
            continue
        parts = mt.changelog_partitions()
        if any(s.pending_changelog_records for s in parts.values()):
            log.info("task %s: no snapshot (changelog records not flushed)", mt.id)
            continue
        stores.update(parts)
    if not stores:
        return 0
    consumer = AIOKafkaConsumer(bootstrap_servers=config.bootstrap_servers, group_id=None,
                                enable_auto_commit=False, client_id=f"{config.application_id}-snapshot")
    await consumer.start()
    try:
        # read_uncommitted high watermarks: the end of what this instance wrote (acks=all)
        ends = await consumer.end_offsets(list(stores))
    finally:
        await consumer.stop()
    # the shutdown deadline also covers closing the clients after this: use at most half of it
    deadline = time.monotonic() + config.shutdown_timeout_ms / 2000
    return await snapshots.save(stores, ends, deadline)

