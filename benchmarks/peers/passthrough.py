"""The ceiling: a raw aiokafka consume -> produce passthrough, no deserialisation, no state.

    python -m benchmarks.peers.passthrough --bootstrap B --group G --input clicks --output out

A consumer in group ``G`` (``getmany`` batches of up to 5000 records), every record re-sent
unchanged (key, value, timestamp) to the same partition of ``--output`` as whole producer batches
(``create_batch``/``send_batch``, the producer path streamproc uses), offsets committed once the
batch's sends are acknowledged. Producer ``acks=all``, idempotent, linger 5 ms; consumer fetch wait
100 ms, 4 MiB per partition fetch; uvloop. Runs until SIGTERM/SIGINT. The loop is the shared one
of :mod:`benchmarks.harness` (:func:`~benchmarks.harness.passthrough_round`).
"""

from __future__ import annotations

import argparse
import asyncio
import signal

import uvloop

from benchmarks.harness import passthrough_clients, passthrough_round


async def run(bootstrap: str, group: str, source: str, sink: str) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumer, producer = await passthrough_clients(bootstrap, [source], group)
    try:
        while not stop.is_set():
            await passthrough_round(consumer, producer, sink)
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
