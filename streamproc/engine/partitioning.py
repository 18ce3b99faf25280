"""How a record becomes bytes and which partition it goes to: the rules every engine shares.

The daemon's producer, the Spark engine and the tests place a serialised key on the partition
Kafka's Java clients would choose (murmur2 of the key bytes, made positive, modulo the partition
count), so co-partitioned topics written by us and by a Kafka Streams application agree.
A record without a key goes round-robin.
"""

from __future__ import annotations

import itertools
from typing import Any

from aiokafka.partitioner import murmur2

from ..serde import JSON

__all__ = ["HASH_CACHE", "HASH_CACHE_MAX", "ROUND_ROBIN", "partition_for", "to_bytes"]

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
