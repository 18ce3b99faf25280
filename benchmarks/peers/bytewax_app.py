"""The Bytewax peer: session windows per user with Bytewax's Kafka source, session windower and sink.

Runs in its own venv (``requirements-bytewax.txt``: bytewax 0.21.1 with confluent-kafka); standard
library + bytewax only.

    python bytewax_app.py --bootstrap B --input clicks --output out --gap-ms 1800000 \
        --grace-ms 300000 --ready-file PATH

Dataflow (one worker, one process): Kafka input (``tail=False``: every partition is read from the
beginning until the consumer reaches its end (librdkafka's partition EOF), then the input ends) -> the key
decoded as the user id and the value parsed as JSON (like streamproc's ``serde.JSON``; the content
is not used) -> ``fold_window`` with ``SessionWindower(gap)`` keeping ``[first ts, last ts, clicks]``
per session (merged sessions add up) -> ``{"user", "start", "end", "clicks", "duration_ms"}`` keyed
by the user, timestamp = session end (start and end inclusive: streamproc's output) -> Kafka output.

Semantics, and how they are made to match streamproc's on the benchmark's input:

* *Who shares a session*: Bytewax's session windower puts a click in a session when it is at most
  ``gap`` before its first or after its last click (inclusive, as streamproc), and merges sessions
  that come within ``gap`` of each other (an out-of-order click bridging two): the same sessions.
* *Clock*: an ``EventClock`` on the record's timestamp with ``wait_for_system_duration = grace``.
  Bytewax's watermark is kept **per key** (per user), not per partition, and by default also
  advances with the wall clock; here the clock's ``now`` is fixed and it never wakes up on the wall
  clock (``to_system_utc`` returns None), so the watermark is event time only: the user's latest
  click - grace. A click is late (dropped to the ``late`` stream) when it is older than that; the
  benchmark's out-of-order clicks are at most 2 min old, never late for grace 5 min.
* *When a session is emitted*: when the user's own watermark passes its last click + gap, i.e. the
  user clicks again more than ``gap + grace`` later; every other session when the input ends
  (``tail=False``: Bytewax closes all windows at end of input). So the output holds every session,
  as streamproc's does after its end-of-input marker (the markers, keys ``~flush-<p>``, are just
  sessions of their own here, ignored by the check).
* *State*: in memory, no recovery configured (Bytewax snapshots state to SQLite only with
  recovery on): less work than streamproc's change-logged store.
* *No consumer group*: Bytewax assigns the partitions itself and keeps offsets in its recovery
  store, so the harness cannot watch a group. The first record to reach the dataflow writes
  ``time.time()`` and the process's CPU seconds so far to ``--ready-file``; the harness starts its
  clock and CPU count there.

Producer: ``acks=all``, idempotent, ``linger.ms=5`` (Bytewax's sink flushes after every batch);
consumer: ``fetch.wait.max.ms=100``, 4 MiB per partition, batches of up to 5000 records.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import UTC, datetime, timedelta

import bytewax.operators as op
from bytewax.connectors.kafka import KafkaSinkMessage, KafkaSourceMessage
from bytewax.connectors.kafka import operators as kop
from bytewax.dataflow import Dataflow
from bytewax.operators.windowing import EventClock, SessionWindower, fold_window
from bytewax.run import cli_main

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def build(bootstrap: str, source: str, sink: str, gap_ms: int, grace_ms: int, ready_file: str | None) -> Dataflow:
    """The sessions dataflow (see the module docstring)."""
    flow = Dataflow("sessions")
    kin = kop.input("in", flow, brokers=[bootstrap], topics=[source], tail=False, batch_size=5000,
                    add_config={"fetch.wait.max.ms": "100", "max.partition.fetch.bytes": str(4 * 1024 * 1024)})
    seen = [False]

    def click(msg: KafkaSourceMessage[bytes | None, bytes | None]) -> tuple[str, int]:
        if not seen[0]:
            seen[0] = True
            if ready_file:
                with open(ready_file + ".tmp", "w") as f:
                    f.write(f"{time.time()!r} {time.process_time()!r}\n")
                os.replace(ready_file + ".tmp", ready_file)
        if msg.value is not None:
            json.loads(msg.value)  # what streamproc's serde.JSON does with every value
        assert msg.timestamp is not None and msg.key is not None
        return msg.key.decode(), msg.timestamp[1]

    clicks = op.map("decode", kin.oks, click)

    def ts_of(ts_ms: int) -> datetime:
        return EPOCH + timedelta(milliseconds=ts_ms)

    clock = EventClock(ts_getter=ts_of, wait_for_system_duration=timedelta(milliseconds=grace_ms),
                       now_getter=lambda: EPOCH, to_system_utc=lambda _t: None)

    def fold(acc: list[int], ts: int) -> list[int]:
        if acc[2] == 0:
            return [ts, ts, 1]
        return [min(acc[0], ts), max(acc[1], ts), acc[2] + 1]

    def merge(a: list[int], b: list[int]) -> list[int]:
        return [min(a[0], b[0]), max(a[1], b[1]), a[2] + b[2]]

    keyed = op.key_on("by-user", clicks, lambda kv: kv[0])
    values = op.map_value("ts", keyed, lambda kv: kv[1])
    windows = fold_window("session-clicks", values, clock, SessionWindower(gap=timedelta(milliseconds=gap_ms)),
                          lambda: [0, 0, 0], fold, merge)

    def out(item: tuple[str, tuple[int, list[int]]]) -> KafkaSinkMessage[bytes, bytes]:
        user, (_window_id, (start, end, n)) = item
        value = {"user": user, "start": start, "end": end, "clicks": n, "duration_ms": end - start}
        return KafkaSinkMessage(user.encode(), json.dumps(value).encode(), timestamp=end)

    kop.output("out", op.map("stats", windows.down, out), brokers=[bootstrap], topic=sink,
               add_config={"acks": "all", "enable.idempotence": "true", "linger.ms": "5"})
    return flow


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--gap-ms", type=int, required=True)
    ap.add_argument("--grace-ms", type=int, required=True)
    ap.add_argument("--ready-file")
    args = ap.parse_args()
    flow = build(args.bootstrap, args.input, args.output, args.gap_ms, args.grace_ms, args.ready_file)
    cli_main(flow, workers_per_process=1)


if __name__ == "__main__":
    main()
