"""Dead-letter headers, error classification, and the output partitioner."""

from __future__ import annotations

from aiokafka.partitioner import DefaultPartitioner

from streamproc.engine.error_policy import Stage, classify, dead_letter_headers
from streamproc.engine.partitioning import partition_for, to_bytes
from streamproc.errors import ProcessingError, SerializationError


def test_classify() -> None:
    assert classify(SerializationError("bad")) is Stage.DESERIALIZATION
    wrapped = ProcessingError("x")
    wrapped.__cause__ = SerializationError("inner")
    assert classify(wrapped) is Stage.DESERIALIZATION
    assert classify(ProcessingError("boom")) is Stage.PROCESSING
    assert classify(ZeroDivisionError()) is Stage.PROCESSING


def test_dead_letter_headers_keep_originals_and_add_error_context() -> None:
    h = dead_letter_headers([("trace", b"1")], ValueError("bad value"), Stage.PROCESSING, "clicks", 3, 42)
    d = dict(h)
    assert d["trace"] == b"1"
    assert d["streamproc.error.class"] == b"ValueError"
    assert d["streamproc.error.message"] == b"bad value"
    assert (d["streamproc.error.topic"], d["streamproc.error.partition"], d["streamproc.error.offset"]) == \
        (b"clicks", b"3", b"42")
    assert d["streamproc.error.stage"] == b"processing"
    long = dead_letter_headers(None, ValueError("x" * 10_000), Stage.PROCESSING, "t", 0, 0)
    assert len(dict(long)["streamproc.error.message"]) < 4200


def test_partition_for_matches_kafkas_default_partitioner() -> None:
    parts = list(range(8))
    for i in range(500):
        key = f"user-{i}".encode()
        assert partition_for(key, 8) == DefaultPartitioner()(key, parts, parts)
    assert {partition_for(None, 4) for _ in range(8)} == {0, 1, 2, 3}


def test_to_bytes() -> None:
    assert to_bytes(b"x", "k") == b"x"
    assert to_bytes(None, "k") is None
    assert to_bytes({"a": 1}, "v") == b'{"a":1}'
    assert to_bytes(bytearray(b"y"), "v") == b"y"
