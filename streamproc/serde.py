"""Serdes: turn keys and values into bytes at the Kafka boundary, and back.

Stores hold Python objects; bytes appear only on topics and changelogs. ``None`` always maps to
``None`` (a Kafka null / tombstone) in both directions.

A failure raises :class:`~streamproc.errors.SerializationError` naming the serde, the topic or
store (``where``), and the offending value or bytes (truncated)::

    >>> INT.deserialize(b"abc", where="topic 'clicks'")
    Traceback (most recent call last):
    ...
    streamproc.errors.SerializationError: int serde cannot deserialize 3 bytes from topic 'clicks': ...
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from typing import Any

from .errors import SerializationError

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

__all__ = ["BYTES", "FLOAT", "INT", "INT32", "JSON", "STRING", "Serde", "by_name", "show_bytes"]

_MAX_SHOWN = 64


def show_bytes(data: bytes | bytearray | memoryview, limit: int = _MAX_SHOWN) -> str:
    """A printable, truncated rendering of ``data`` for error messages."""
    raw = bytes(data)
    shown = repr(raw[:limit])
    return shown + (f"... ({len(raw)} bytes)" if len(raw) > limit else "")


def _show_value(value: Any, limit: int = _MAX_SHOWN) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class Serde:
    """A named pair of functions ``to_bytes(value) -> bytes`` and ``from_bytes(bytes) -> value``."""

    __slots__ = ("_from", "_to", "name")

    def __init__(self, name: str, to_bytes: Callable[[Any], bytes], from_bytes: Callable[[bytes], Any]):
        self.name = name
        self._to = to_bytes
        self._from = from_bytes

    def serialize(self, value: Any, where: str = "") -> bytes | None:
        if value is None:
            return None
        try:
            return self._to(value)
        except Exception as exc:  # re-raised with context
            loc = f" for {where}" if where else ""
            raise SerializationError(
                f"{self.name} serde cannot serialize {type(value).__name__} value {_show_value(value)}{loc}: {exc}"
            ) from exc

    def deserialize(self, data: bytes | None, where: str = "") -> Any:
        if data is None:
            return None
        try:
            return self._from(data)
        except Exception as exc:  # re-raised with context
            loc = f" from {where}" if where else ""
            raise SerializationError(
                f"{self.name} serde cannot deserialize {len(data)} bytes{loc}: {exc}; bytes={show_bytes(data)}"
            ) from exc

    def __repr__(self) -> str:
        return f"Serde({self.name!r})"


def _bytes_to(value: Any) -> bytes:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(value).__name__}")
    return bytes(value)


def _str_to(value: Any) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected str, got {type(value).__name__}")
    return value.encode("utf-8")


def _int_to(value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected int, got {type(value).__name__}")
    return value.to_bytes(8, "big", signed=True)


def _int_from(data: bytes) -> int:
    if len(data) != 8:
        raise ValueError(f"expected 8 bytes (a big-endian int64), got {len(data)}")
    return int.from_bytes(data, "big", signed=True)


def _int32_to(value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"expected int, got {type(value).__name__}")
    return value.to_bytes(4, "big", signed=True)


def _int32_from(data: bytes) -> int:
    if len(data) != 4:
        raise ValueError(f"expected 4 bytes (a big-endian int32), got {len(data)}")
    return int.from_bytes(data, "big", signed=True)


_DOUBLE = struct.Struct(">d")


def _float_to(value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected float, got {type(value).__name__}")
    return _DOUBLE.pack(float(value))


def _float_from(data: bytes) -> float:
    if len(data) != 8:
        raise ValueError(f"expected 8 bytes (a big-endian IEEE-754 double), got {len(data)}")
    return _DOUBLE.unpack(data)[0]


_json_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# 19+ consecutive digits: an integer orjson would read as a (rounded) float, or a long mantissa
_LONG_DIGITS = re.compile(rb"[0-9]{19}")
_DIGITS = b"0123456789"


def _json_to_stdlib(value: Any) -> bytes:
    return _json_encoder.encode(value).encode("utf-8")


def _json_from_stdlib(data: bytes) -> Any:
    return json.loads(data)


def _plain_finite(value: Any) -> bool:
    """Whether ``value`` holds only exact ``dict`` (keys ``str``, ``int``, ``float``, ``bool`` or
    None), ``list``, ``tuple``, ``str``, ``int``, ``bool``, None and finite ``float`` values. For
    such a value the standard encoder (``allow_nan=False``) raises nothing, so the output of orjson
    (which succeeded) needs no re-check with it; anything else (other types, NaN, Infinity) is
    re-checked as before. ~20x cheaper than encoding it again."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return True
    if t is float:
        return value - value == 0.0  # (NaN and +-Infinity give NaN)
    if t is dict:
        for k, v in value.items():
            tk = type(k)
            if tk is float:
                if k - k != 0.0:
                    return False
            elif not (tk is str or tk is int or tk is bool or k is None):
                return False
            if not _plain_finite(v):
                return False
        return True
    if t is list or t is tuple:
        for v in value:
            if not _plain_finite(v):
                return False
        return True
    return False


def _right_size(data: bytes) -> bytes:
    """A copy of ``data`` in an allocation of its own size."""
    return memoryview(data).tobytes()


if _orjson is not None:
    _dumps, _loads, _NON_STR_KEYS = _orjson.dumps, _orjson.loads, _orjson.OPT_NON_STR_KEYS
    _OrjsonDecodeError = _orjson.JSONDecodeError

    def _json_to(value: Any) -> bytes:
        """Compact UTF-8 JSON (orjson; the standard library for what orjson cannot write).

        orjson writes NaN/Infinity as ``null``: output containing ``null`` is re-checked with the
        standard encoder, which rejects non-finite floats (``allow_nan=False``), unless
        :func:`_plain_finite` shows it would accept the value."""
        if type(value) is int:  # fast path (counts); bool is not int here
            return int.__repr__(value).encode()
        try:
            out: bytes = _dumps(value, option=_NON_STR_KEYS)
        except TypeError:  # integers beyond 64 bits, types orjson does not know: the stdlib decides
            return _json_to_stdlib(value)
        # (not `in`: bytes.__contains__ tries an int first, 2x slower)
        if out.find(b"null") >= 0 and not _plain_finite(value):
            _json_encoder.encode(value)  # raises ValueError for NaN/Infinity
        # orjson (3.12+) returns bytes whose allocation is rounded up to 4 KiB or more: a 60-byte
        # value would hold 4 KiB while it waits in a send buffer or a changelog buffer. A right-sized
        # copy costs ~0.1 us.
        return _right_size(out)

    def _json_from(data: bytes) -> Any:
        """orjson; the standard library for what orjson reads differently or rejects (integers of
        19+ digits, which orjson rounds to floats; ``NaN``/``Infinity``; lone surrogates) - so the
        values, and the errors, are those of ``json.loads``."""
        # a run of 19 digits needs 19 digits in all: counting them (one C call) is 3x cheaper than
        # the regex search, which then runs only on data with that many digits
        if len(data) >= 19 and (type(data) is not bytes or len(data) - len(data.translate(None, _DIGITS)) >= 19) \
                and _LONG_DIGITS.search(data) is not None:
            return json.loads(data)
        try:
            return _loads(data)
        except _OrjsonDecodeError:
            return json.loads(data)
else:  # pragma: no cover - orjson is a dependency; this keeps the package importable without it
    _json_to, _json_from = _json_to_stdlib, _json_from_stdlib


class _StringSerde(Serde):
    """UTF-8 strings: ``str``/``bytes`` handled inline (the hot path of string keys); anything else,
    and every error, through :class:`Serde` (same results, same messages)."""

    __slots__ = ()

    def serialize(self, value: Any, where: str = "") -> bytes | None:
        if type(value) is str:
            try:
                return value.encode()
            except UnicodeEncodeError:
                pass
        return Serde.serialize(self, value, where)

    def deserialize(self, data: bytes | None, where: str = "") -> Any:
        if type(data) is bytes:
            try:
                return data.decode()
            except UnicodeDecodeError:
                pass
        return Serde.deserialize(self, data, where)


class _JsonSerde(Serde):
    """JSON with the checks of :class:`Serde` inlined (one call per value instead of two)."""

    __slots__ = ()

    def serialize(self, value: Any, where: str = "") -> bytes | None:
        if value is None:
            return None
        try:
            return _json_to(value)
        except Exception:  # noqa: BLE001 - re-raised with context by the generic path
            return Serde.serialize(self, value, where)

    def deserialize(self, data: bytes | None, where: str = "") -> Any:
        if data is None:
            return None
        try:
            return _json_from(data)
        except Exception:  # noqa: BLE001 - re-raised with context by the generic path
            return Serde.deserialize(self, data, where)


BYTES = Serde("bytes", _bytes_to, bytes)
STRING = _StringSerde("string", _str_to, lambda b: bytes(b).decode("utf-8"))
INT = Serde("int", _int_to, _int_from)
INT32 = Serde("int32", _int32_to, _int32_from)
FLOAT = Serde("float", _float_to, _float_from)
JSON = _JsonSerde("json", _json_to, _json_from)

_BY_NAME = {s.name: s for s in (BYTES, STRING, INT, INT32, FLOAT, JSON)}


def by_name(name: str) -> Serde:
    """Look a built-in serde up by name (``bytes``, ``string``, ``int``, ``int32``, ``float``, ``json``)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise ValueError(f"unknown serde {name!r}; built-in serdes are {sorted(_BY_NAME)}") from None


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def _json_key_from(data: bytes) -> Any:
    return _tuplify(_json_from(data))


#: JSON for keys: arrays decode as (nested) tuples, so a tuple key survives a round trip hashable.
#: Change-logged stores use it for keys when no key serde is given.
JSON_KEY = Serde("json-key", _json_to, _json_key_from)

__all__ += ["JSON_KEY"]
