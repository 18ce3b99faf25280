"""streamproc's murmur2 (compiled: a C loop) gives aiokafka's (Kafka's) values, and so the same partitions."""

from __future__ import annotations

import random

from aiokafka.partitioner import murmur2 as kafka_murmur2

from streamproc.engine.partitioning import HASH_CACHE, murmur2, partition_for


def test_murmur2_equals_kafkas_on_every_length_and_byte_value() -> None:
    rng = random.Random(7)
    for length in [*range(40), 255, 1000]:
        for _ in range(100):
            data = bytes(rng.randrange(256) for _ in range(length))
            assert murmur2(data) == kafka_murmur2(data), data
    for data in (b"", b"\xff" * 13, b"\x80\x00\x7f\xff", "käse".encode()):
        assert murmur2(data) == kafka_murmur2(data)
        assert murmur2(bytearray(data)) == kafka_murmur2(data)


def test_partition_for_is_kafkas_default_partition() -> None:
    HASH_CACHE.clear()
    for i in range(2000):
        key = f"pay-{i:07d}".encode()
        assert partition_for(key, 12) == (kafka_murmur2(key) & 0x7FFFFFFF) % 12
