"""Where a buffered record came from, so an error on its later release blames it (docs/semantics.md,
"Errors in records released from buffers").

A record an operator keeps and acts on later (a stream record in a stream-table join's grace
buffer; an unmatched record of an outer stream-stream join, emitted with a ``None`` partner once
it is final) keeps its :class:`Origin`: its source position, its timestamp, its key and value as
fetched (bytes in the daemon and on Spark; the piped objects in a ``TopologyTestDriver`` without
serdes) and its headers. The origin is stored with the buffered entry in the change-logged store,
so it survives a restart.

Serialised form (:func:`encode_origin` / :func:`decode_origin`), inside a buffer store's changelog
value: ``topic`` (2-byte length + UTF-8), ``partition`` (4-byte signed, -1 = unknown), ``offset``
and ``timestamp`` (8-byte signed, -1 = unknown), ``key`` and ``value`` (4-byte length + bytes,
length ``0xFFFFFFFF`` = None), headers (2-byte count, then per header a 2-byte name length + UTF-8
name and a 4-byte value length + bytes). Key and value that are not bytes (driver records without
serdes) are stored as the UTF-8 of their ``repr``: an origin read back from a changelog always
has bytes (or None).

:func:`released_error`: what an operator does when a user function (or an operator downstream)
raises on a record it releases from a buffer: the :class:`~streamproc.errors.ProcessingError` is
given the origin's position, then handed with the origin to the task's
``released_error_handler`` (the operator goes on with the record being processed), or raised
when the task has none.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from ..errors import ProcessingError

__all__ = ["UNKNOWN_ORIGIN", "Origin", "decode_origin", "encode_origin", "origin_of", "released_error"]

_H = struct.Struct(">H")
_I = struct.Struct(">I")
_POS = struct.Struct(">iqq")
_NONE = 0xFFFFFFFF


class Origin(NamedTuple):
    """A buffered record's source record: ``topic``, ``partition``, ``offset``, ``timestamp``,
    ``key`` and ``value`` as fetched, ``headers`` (a sequence of ``(name, bytes)``)."""

    topic: str | None
    partition: int | None
    offset: int | None
    timestamp: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes], ...]


#: The origin of an entry restored from a changelog written before origins were kept.
UNKNOWN_ORIGIN = Origin(None, None, None, -1, None, None, ())


_new_origin = tuple.__new__     # Origin(...) without the NamedTuple __new__ wrapper (per buffered record)


def origin_of(record: Any) -> Origin:
    """The origin of ``record`` (a task's ``current`` record: ``topic``, ``partition``, ``offset``,
    ``timestamp``, ``key``, ``value``, ``headers``)."""
    headers = record.headers
    return _new_origin(Origin, (record.topic, record.partition, record.offset, record.timestamp, record.key,
                                record.value, headers if type(headers) is tuple else tuple(headers or ())))


def _raw(data: Any) -> bytes | None:
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    return repr(data).encode("utf-8", "replace")


_FAST = struct.Struct(">iqqI")


def encode_origin(origin: Origin) -> bytes:
    """``origin`` as bytes (the layout in the module docstring)."""
    topic_name, partition, offset, timestamp, key, value, headers = origin
    if (not headers and type(key) is bytes and type(value) is bytes and topic_name is not None
            and partition is not None and offset is not None):   # the daemon's common case, in one go
        topic = topic_name.encode()
        return b"".join((_H.pack(len(topic)), topic, _FAST.pack(partition, offset, timestamp, len(key)), key,
                         _I.pack(len(value)), value, b"\x00\x00"))
    topic = (origin.topic or "").encode()
    parts = [_H.pack(len(topic)), topic,
             _POS.pack(-1 if origin.partition is None else origin.partition,
                       -1 if origin.offset is None else origin.offset, origin.timestamp)]
    for data in (_raw(origin.key), _raw(origin.value)):
        if data is None:
            parts.append(_I.pack(_NONE))
        else:
            parts += [_I.pack(len(data)), data]
    parts.append(_H.pack(len(origin.headers)))
    for name, value in origin.headers:
        raw_name = str(name).encode()
        raw_value = _raw(value) or b""
        parts += [_H.pack(len(raw_name)), raw_name, _I.pack(len(raw_value)), raw_value]
    return b"".join(parts)


def decode_origin(data: bytes, pos: int = 0) -> tuple[Origin, int]:
    """The origin encoded at ``data[pos:]`` and the position after it."""
    (n,) = _H.unpack_from(data, pos)
    pos += 2
    topic = bytes(data[pos:pos + n]).decode() or None
    pos += n
    partition, offset, timestamp = _POS.unpack_from(data, pos)
    pos += _POS.size
    raw: list[bytes | None] = []
    for _ in range(2):
        (n,) = _I.unpack_from(data, pos)
        pos += 4
        if n == _NONE:
            raw.append(None)
        else:
            raw.append(bytes(data[pos:pos + n]))
            pos += n
    (count,) = _H.unpack_from(data, pos)
    pos += 2
    headers = []
    for _ in range(count):
        (n,) = _H.unpack_from(data, pos)
        name = bytes(data[pos + 2:pos + 2 + n]).decode()
        pos += 2 + n
        (n,) = _I.unpack_from(data, pos)
        headers.append((name, bytes(data[pos + 4:pos + 4 + n])))
        pos += 4 + n
    origin = Origin(topic, None if partition < 0 else partition, None if offset < 0 else offset, timestamp,
                    raw[0], raw[1], tuple(headers))
    return origin, pos


def released_error(task: Any, exc: ProcessingError, origin: Origin, operator: str) -> None:
    """Blame ``origin`` for ``exc`` (raised while ``operator`` released that record from its buffer):
    set ``exc``'s topic, partition and offset to the origin's and say so in its message; then call
    ``task.released_error_handler(exc, origin)`` if the task has one (the caller goes on), else raise
    ``exc`` (the record being processed is not blamed: the position is already set)."""
    exc.topic, exc.partition, exc.offset = origin.topic, origin.partition, origin.offset
    current = getattr(task, "current", None)
    by = (f"; released by the record at {current.topic}[{current.partition}]@{current.offset}"
          if current is not None and getattr(current, "topic", None) is not None else "")
    where = (f"{origin.topic}[{origin.partition}]@{origin.offset}" if origin.topic is not None
             else "an unknown position (buffered before origins were kept)")
    if exc.args:
        message = (f"{exc.args[0]} at {where} (a record released later from the buffer of operator "
                   f"{operator!r}{by})")
        exc.args = (message, *exc.args[1:])
    handler = getattr(task, "released_error_handler", None)
    if handler is None:
        raise exc
    handler(exc, origin)
