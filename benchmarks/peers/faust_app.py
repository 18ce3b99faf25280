"""The faust-streaming peer: per-user sessions kept by hand in a change-logged faust Table.

Runs in its own venv (``requirements-faust.txt``: faust-streaming with uvloop and orjson);
standard library + faust only.

    python faust_app.py --bootstrap B --app-id G --input clicks --output out --gap-ms 1800000 \
        --partitions 8 --datadir DIR

faust has no session windows (only tumbling/hopping windowed tables), so the nearest it offers is a
``Table`` (``memory://`` store, change-logged to ``<app-id>-session-clicks-changelog``) holding each
user's open session ``[last, start, clicks, partition]``. An agent reads every click (key as bytes,
value decoded as JSON by faust); a click more than ``gap`` after the user's last click closes the
session (it is sent to the output as ``{"user", "start", "end", "clicks", "duration_ms"}``, end
inclusive) and starts a new one; any other click extends it. Unlike streamproc and Quix there is no
event-time merging of out-of-order clicks, no grace, and a session closes only when its own user
clicks again; an end-of-input marker (key ``~flush-<p>``) makes the agent emit every open session of
partition ``p``, so the output is complete. Every table update writes one changelog record (faust
has no write cache).

Settings made comparable with the other peers: commit every 1 s, ``acks=-1`` (all), linger 5 ms,
up to 5000 records per fetch, earliest offset reset, uvloop, no web server, no standby replicas.
"""

from __future__ import annotations

import argparse
import logging

import mode.loop


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--app-id", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--gap-ms", type=int, required=True)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--loop", default="uvloop", choices=("uvloop", "aio"))
    ap.add_argument("--datadir", default=None, help="faust's data directory (default: <app-id>-data here)")
    args = ap.parse_args()
    mode.loop.use(args.loop)

    import faust

    app = faust.App(
        args.app_id,
        broker=f"kafka://{args.bootstrap}",
        store="memory://",
        topic_partitions=args.partitions,
        topic_replication_factor=1,
        broker_commit_interval=1.0,
        broker_max_poll_records=5000,
        producer_acks=-1,
        producer_linger=0.005,
        consumer_auto_offset_reset="earliest",
        table_standby_replicas=0,
        web_enabled=False,
        **({"datadir": args.datadir} if args.datadir else {}),
        key_serializer="raw",
        value_serializer="json",
    )
    clicks = app.topic(args.input, key_type=bytes, key_serializer="raw", value_serializer="json")
    out = app.topic(args.output, key_type=bytes, key_serializer="raw", value_serializer="json")
    table = app.Table("session-clicks", default=None, partitions=args.partitions, key_type=bytes)
    gap = args.gap_ms

    def stats(user: bytes, s: list[int]) -> dict[str, object]:
        return {"user": user.decode(), "start": s[1], "end": s[0], "clicks": s[2], "duration_ms": s[0] - s[1]}

    @app.agent(clicks)
    async def sessionize(stream):  # type: ignore[no-untyped-def]
        async for event in stream.events():
            key: bytes = event.key
            partition = event.message.partition
            if key.startswith(b"~flush-"):
                due = [(k, v) for k, v in table.items() if v[3] == partition]
                for k, v in due:
                    await out.send(key=k, value=stats(k, v))
                    del table[k]
                continue
            ts = round(event.message.timestamp * 1000)
            s = table.get(key)
            if s is None:
                table[key] = [ts, ts, 1, partition]
            elif ts - s[0] > gap:
                await out.send(key=key, value=stats(key, s))
                table[key] = [ts, ts, 1, partition]
            else:
                table[key] = [max(s[0], ts), min(s[1], ts), s[2] + 1, partition]

    logging.basicConfig(level=logging.WARNING)
    worker = faust.Worker(app, loglevel="WARNING", quiet=True)
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
