"""The ceiling: a raw aiokafka consume -> produce passthrough, no deserialisation, no state.

    python passthrough.py --bootstrap B --group G --input clicks --output out

A consumer in group ``G`` (``getmany`` batches of up to 5000 records), every record re-sent
unchanged (key, value, timestamp) to the same partition of ``--output`` as whole producer batches
(``create_batch``/``send_batch``, the producer path streamproc uses), offsets committed once the
batch's sends are acknowledged. Producer ``acks=all``, idempotent, linger 5 ms; consumer fetch wait
100 ms, 4 MiB per partition fetch; uvloop. Runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import uvloop
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer


async def run(bootstrap: str, group: str, source: str, sink: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False,
                                auto_offset_reset="earliest", max_partition_fetch_bytes=4 * 1024 * 1024,
                                fetch_max_wait_ms=100)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
                                max_batch_size=512 * 1024)
    await producer.start()
    await consumer.start()
    try:
        while not stop.is_set():
            batch = await consumer.getmany(timeout_ms=100, max_records=5000)
            futures = []
            offsets = {}
            for tp, records in batch.items():
                b = producer.create_batch()
                for r in records:
                    if b.append(key=r.key, value=r.value, timestamp=r.timestamp, headers=[]) is None:
                        futures.append(await producer.send_batch(b, sink, partition=tp.partition))
                        b = producer.create_batch()
                        b.append(key=r.key, value=r.value, timestamp=r.timestamp, headers=[])
                futures.append(await producer.send_batch(b, sink, partition=tp.partition))
                offsets[tp] = records[-1].offset + 1
            if futures:
                await asyncio.gather(*futures)
                await consumer.commit(offsets)
    finally:
        await consumer.stop()
        await producer.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args()
    uvloop.run(run(args.bootstrap, args.group, args.input, args.output))


if __name__ == "__main__":
    main()
