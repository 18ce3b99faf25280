"""Serdes the DSL uses for its own topics and stores.

- :data:`JSON_OR_BYTES`: the builder's default serde for repartition topics and store changelogs when
  no serde is known for the data. ``bytes`` values (what a source without a serde yields in the
  daemon) are written as ``b"\\x00" + raw``; every other value as compact JSON (which never starts
  with a NUL byte). So it round-trips bytes, str, int, float, bool, None, lists and dicts; tuples
  come back as lists.
- :data:`JSON_OR_BYTES_KEY`: the same for keys, JSON arrays decode as tuples (hashable, ordered).
- :func:`buffer_key_serde`: keys ``(timestamp, key, sequence)`` of the stream-table join buffer:
  8-byte big-endian timestamp + 8-byte sequence + the key's bytes.
- :func:`buffered_value_serde`: values ``(value, origin)`` of a join buffer: the marker
  :data:`ORIGIN_MARKER`, the value's length (4 bytes, ``0xFFFFFFFF`` = None) and bytes through the
  value serde, then the :class:`~streamproc.processors.origin.Origin` (its own layout). A changelog
  value without the marker (written before origins were kept) restores as ``(value,
  UNKNOWN_ORIGIN)``; so a value serde whose bytes may begin with the marker (only a raw-bytes
  serde can) must not be used for a buffer restored from such an old changelog.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from ..serde import Serde
from .origin import UNKNOWN_ORIGIN, decode_origin, encode_origin

__all__ = ["JSON_OR_BYTES", "JSON_OR_BYTES_KEY", "ORIGIN_MARKER", "buffer_key_serde", "buffered_value_serde"]

_json_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _to(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return b"\x00" + bytes(value)
    return _json_encoder.encode(value).encode("utf-8")


def _from(data: bytes) -> Any:
    if data[:1] == b"\x00":
        return bytes(data[1:])
    return json.loads(data)


JSON_OR_BYTES = Serde("json-or-bytes", _to, _from)


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def _key_from(data: bytes) -> Any:
    if data[:1] == b"\x00":
        return bytes(data[1:])
    return _tuplify(json.loads(data))


#: :data:`JSON_OR_BYTES` for keys: JSON arrays decode as (nested) tuples, so tuple keys stay hashable.
JSON_OR_BYTES_KEY = Serde("json-or-bytes-key", _to, _key_from)

_HEAD = struct.Struct(">qq")


def buffer_key_serde(key_serde: Serde) -> Serde:
    """Serde of join-buffer keys ``(timestamp, key, sequence)``, the key part through ``key_serde``."""

    def to_bytes(value: Any) -> bytes:
        ts, key, seq = value
        raw = key_serde.serialize(key, "join buffer key")
        return _HEAD.pack(ts, seq) + (raw or b"")

    def from_bytes(data: bytes) -> Any:
        ts, seq = _HEAD.unpack_from(data, 0)
        return (ts, key_serde.deserialize(bytes(data[_HEAD.size:]), "join buffer key"), seq)

    return Serde(f"join-buffer-key({key_serde.name})", to_bytes, from_bytes)


#: First bytes of a buffered value that carries its origin (never the start of UTF-8 or JSON text).
ORIGIN_MARKER = b"\xffSPo"
_LEN = struct.Struct(">I")
_H2 = struct.Struct(">H")
_MARKED_LEN = struct.Struct(">4sI")
_ORIGIN_FAST = struct.Struct(">iqqI")      # partition, offset, timestamp, key length (encode_origin's layout)
_NO_VALUE = 0xFFFFFFFF
_TOPICS: dict[str, bytes] = {}


def _topic_bytes(topic: str) -> bytes:
    """``topic`` as encode_origin writes it: 2-byte length + UTF-8 (cached per topic)."""
    raw = _TOPICS.get(topic)
    if raw is None:
        name = topic.encode()
        raw = _TOPICS[topic] = _H2.pack(len(name)) + name
    return raw


def buffered_value_serde(value_serde: Serde) -> Serde:
    """Serde of join-buffer values ``(value, origin)``, the value through ``value_serde``."""
    where = "join buffer value"

    def to_bytes(entry: Any) -> bytes:
        value, origin = entry
        raw = value_serde.serialize(value, where)
        topic, partition, offset, timestamp, key, fetched, headers = origin
        if (raw is not None and not headers and type(key) is bytes and type(fetched) is bytes
                and topic is not None and partition is not None and offset is not None):
            # the daemon's common case in one join: encode_origin's layout, written inline
            return b"".join((_MARKED_LEN.pack(ORIGIN_MARKER, len(raw)), raw, _topic_bytes(topic),
                             _ORIGIN_FAST.pack(partition, offset, timestamp, len(key)), key,
                             _LEN.pack(len(fetched)), fetched, b"\x00\x00"))
        head = ORIGIN_MARKER + (_LEN.pack(_NO_VALUE) if raw is None else _LEN.pack(len(raw)) + raw)
        return head + encode_origin(origin)

    def from_bytes(data: bytes) -> Any:
        if data[:4] != ORIGIN_MARKER:               # written before origins were kept
            return (value_serde.deserialize(data, where), UNKNOWN_ORIGIN)
        (n,) = _LEN.unpack_from(data, 4)
        pos = 8
        value = None
        if n != _NO_VALUE:
            value = value_serde.deserialize(bytes(data[pos:pos + n]), where)
            pos += n
        return (value, decode_origin(data, pos)[0])

    return Serde(f"buffered-value({value_serde.name})", to_bytes, from_bytes)
