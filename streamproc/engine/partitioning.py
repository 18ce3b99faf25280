"""How a record becomes bytes and which partition it goes to: the rules every engine shares.

The daemon's producer, the Spark engine and the tests place a serialised key on the partition
Kafka's Java clients would choose (murmur2 of the key bytes, made positive, modulo the partition
count), so co-partitioned topics written by us and by a Kafka Streams application agree.
A record without a key goes round-robin.

:func:`murmur2` is Kafka's hash (``Utils.murmur2``), the same values as aiokafka's pure-Python
``murmur2``; this module is compiled (``streamproc/_native.py``) with its locals typed as C
integers (``partitioning.pxd``), so a hash is a C loop instead of ~40 Python operations per 4 bytes
(a topology whose output keys are all distinct, e.g. payment ids, hashes every output record).
"""

from __future__ import annotations

import itertools
from typing import Any

from ..serde import JSON

__all__ = ["HASH_CACHE", "HASH_CACHE_MAX", "ROUND_ROBIN", "murmur2", "partition_for", "to_bytes"]

#: Memoised murmur2 hashes of recent keys (cleared when it reaches :data:`HASH_CACHE_MAX`); the
#: producer's hot loop reads it directly.
HASH_CACHE: dict[bytes, int] = {}
HASH_CACHE_MAX = 200_000
#: The counter that spreads records without a key over the partitions.
ROUND_ROBIN = itertools.count()


def to_bytes(value: Any, what: str) -> bytes | None:
    """``bytes``/``None`` unchanged; ``bytearray``/``memoryview`` copied; anything else JSON
    (``what`` names the value in a :class:`~streamproc.errors.SerializationError`)."""
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return JSON.serialize(value, what)


#: murmur2's seed and the 32-bit mask (C integers when compiled, see partitioning.pxd)
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes | bytearray) -> int:
    """Kafka's murmur2 hash of ``data`` as an unsigned 32-bit int (mask it with ``0x7FFFFFFF`` for a
    partition, as the Java client's ``toPositive`` does)."""
    length = len(data)
    buf = data
    h = (_SEED ^ length) & _MASK32
    end = length & ~3
    i = 0
    while i < end:
        k = buf[i + 3]  # (widened first: compiled, the shift by 24 is on a 64-bit integer)
        k = (k << 24) | (buf[i + 2] << 16) | (buf[i + 1] << 8) | buf[i]
        k = (k * 0x5BD1E995) & _MASK32
        k ^= k >> 24
        k = (k * 0x5BD1E995) & _MASK32
        h = ((h * 0x5BD1E995) & _MASK32) ^ k
        i += 4
    extra = length & 3
    if extra >= 3:
        h ^= buf[end + 2] << 16
    if extra >= 2:
        h ^= buf[end + 1] << 8
    if extra >= 1:
        h ^= buf[end]
        h = (h * 0x5BD1E995) & _MASK32
    h ^= h >> 13
    h = (h * 0x5BD1E995) & _MASK32
    h ^= h >> 15
    return h


def partition_for(key: bytes | None, num_partitions: int) -> int:
    """Kafka's default partition for a serialised key (murmur2, positive, modulo); round-robin for None."""
    if key is None:
        return next(ROUND_ROBIN) % num_partitions
    h = HASH_CACHE.get(key)
    if h is None:
        if len(HASH_CACHE) >= HASH_CACHE_MAX:
            HASH_CACHE.clear()
        h = HASH_CACHE[key] = murmur2(key) & 0x7FFFFFFF
    return h % num_partitions
