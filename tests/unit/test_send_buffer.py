"""SendBuffer: records go into aiokafka producer batches as they are added, in order, a full batch
queued and a new one opened; each batch is sent with the sources of its topic-partition."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.producer.message_accumulator import BatchBuilder

from streamproc.engine.task_records import OutputRecord
from streamproc.runtime.producer import SendBuffer


class _Producer:
    """create_batch/send_batch of aiokafka's producer; send_batch records what it was given."""

    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.sent: list[tuple[str, int, int, bytes]] = []

    def create_batch(self) -> BatchBuilder:
        return BatchBuilder(self.batch_size, 0)

    async def send_batch(self, batch: BatchBuilder, topic: str, *, partition: int) -> asyncio.Future[Any]:
        count = batch.record_count()
        self.sent.append((topic, partition, count, bytes(batch._build())))  # what the producer sends
        fut = asyncio.get_running_loop().create_future()
        fut.set_result(None)
        return fut


class _Out:
    transactions = None

    def __init__(self, batch_size: int) -> None:
        self.producer = _Producer(batch_size)
        self.partition_counts = {"out": 4, "dlq": 1, "cl": 2}


def _fill(buf: SendBuffer) -> list[dict[str, int]]:
    counts = []
    for run in range(5):
        outputs = [OutputRecord("out", f"user-{i % 37}".encode(), b"v" * (i % 90) if i % 11 else None,
                                1_700_000_000_000 + run * 1000 + i,
                                [("h", b"1")] if i % 7 == 0 else (("t", b"2"),) if i % 13 == 0 else ())
                   for i in range(300)]
        counts.append(buf.add_outputs(outputs, ("in", run % 2)))
        buf.add("dlq", b"k", b"dead" * run, 1_700_000_000_000 + run, [("e", b"x")], source=("in", 0))
    buf.add_to_partition("cl", 1, [(f"c{i}".encode(), str(i).encode() * 5, 1_700_000_000_000 + i)
                                   for i in range(700)])
    return counts


async def _flush(batch_size: int) -> tuple[Any, ...]:
    out = _Out(batch_size)
    buf = SendBuffer(out)  # type: ignore[arg-type]
    counts = _fill(buf)
    n = len(buf)
    sent = await buf.flush()
    return counts, n, [sources for _, sources in sent], out.producer.sent, len(buf)


@pytest.mark.parametrize("batch_size", [16 * 1024, 1500])  # 1500: batches fill up and overflow
async def test_every_record_is_sent_once_in_batches_with_its_sources(batch_size: int) -> None:
    counts, n, sources, sent, left = await _flush(batch_size)
    assert counts == [{"out": 300}] * 5 and n == 5 * 301 + 700 and left == 0
    assert sum(count for _, _, count, _ in sent) == n
    if batch_size == 1500:
        assert len({(topic, partition) for topic, partition, _, _ in sent}) < len(sent)  # some overflowed
    assert frozenset() in sources and frozenset({("in", 0), ("in", 1)}) in sources


async def test_a_record_larger_than_the_batch_size_goes_alone_in_a_new_batch() -> None:
    out = _Out(200)
    buf = SendBuffer(out)  # type: ignore[arg-type]
    buf.add_outputs([OutputRecord("out", b"k", b"small", 1, ())], "src")
    buf.add_outputs([OutputRecord("out", b"k", b"x" * 500, 2, ()), OutputRecord("out", b"k", b"y", 3, ())], "src")
    await buf.flush()
    assert [count for _, _, count, _ in out.producer.sent] == [1, 1, 1]
