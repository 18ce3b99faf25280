"""The Quix Streams peer: a session-window count per user, emitted when the session closes.

Runs in its own venv (``requirements-quix.txt``); standard library + quixstreams only.

    python quix_app.py --bootstrap B --group G --input clicks --output out --gap-ms 1800000 \
        --grace-ms 300000 --state-dir DIR [--closing partition|key]

``sdf.session_window(gap, grace).count().final(closing_strategy=...)``: Quix keeps the sessions in
its windowed RocksDB store (change-logged; Quix has no in-memory windowed store), reads keys as
strings and values as JSON, and writes ``{"start", "end", "value"}`` keyed by the user (end
exclusive). Settings made comparable with the other peers: commit every 1 s, ``acks=all`` with
idempotence, ``linger.ms=5``, ``fetch.wait.max.ms=100``, earliest offset reset. Stops on SIGTERM
(Quix's own handler: finish, commit, close).
"""

from __future__ import annotations

import argparse
import logging

from quixstreams import Application


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--gap-ms", type=int, required=True)
    ap.add_argument("--grace-ms", type=int, required=True)
    ap.add_argument("--state-dir", required=True)
    ap.add_argument("--closing", choices=("partition", "key"), default="partition")
    ap.add_argument("--commit-interval", type=float, default=1.0)
    ap.add_argument("--loglevel", default="WARNING")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        commit_interval=args.commit_interval,
        state_dir=args.state_dir,
        loglevel=args.loglevel,
        consumer_extra_config={"fetch.wait.max.ms": 100, "max.partition.fetch.bytes": 4 * 1024 * 1024},
        producer_extra_config={"acks": "all", "enable.idempotence": True, "linger.ms": 5},
    )
    clicks = app.topic(args.input, key_deserializer="str", value_deserializer="json")
    out = app.topic(args.output, key_serializer="str", value_serializer="json")
    sdf = app.dataframe(clicks)
    sdf = (sdf.session_window(inactivity_gap_ms=args.gap_ms, grace_ms=args.grace_ms, name="session-clicks")
           .count()
           .final(closing_strategy=args.closing))
    sdf.to_topic(out)
    app.run()


if __name__ == "__main__":
    main()
