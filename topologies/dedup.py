"""Drop duplicate events: an event id seen within the last ``WINDOW_MS`` is not forwarded again
(a custom processor of the Processor API with a key-value store and a punctuated purge).

Topics and formats (string keys, JSON values):

- input ``events``: key = event id (UTF-8 string), value = a JSON object (any content),
  timestamp = event time.
- output ``unique-events``: the first record of each id within the window, unchanged (same key,
  value and timestamp).

Rule: a record is a duplicate when its id was forwarded at a time ``t`` with
``record timestamp - t < WINDOW_MS`` (a duplicate does not extend the window). Seen ids live in the
store ``dedup-seen`` (id -> timestamp first seen, changelog ``<application_id>-dedup-seen-changelog``,
so a restart keeps them); a stream-time punctuation every ``PURGE_INTERVAL_MS`` deletes ids older
than the window (stream time - seen >= ``WINDOW_MS``; docs/semantics.md, "Punctuation"). An id seen
again after the window is forwarded again, whether or not the purge has run; a late record (timestamp
behind stream time) whose id was already purged is forwarded too.

Run: ``streamproc run topologies.dedup --bootstrap-servers localhost:9092 --application-id dedup``.
"""

from __future__ import annotations

from typing import Any

from streamproc import serde
from streamproc.dsl import StreamsBuilder, Topology
from streamproc.processor import STREAM_TIME, KeyValueStoreBuilder, ProcessorContext, UserProcessor

__all__ = ["INPUT", "OUTPUT", "PURGE_INTERVAL_MS", "STORE", "WINDOW_MS", "DedupProcessor", "build", "topology"]

INPUT = "events"
OUTPUT = "unique-events"
STORE = "dedup-seen"
WINDOW_MS = 10 * 60_000
PURGE_INTERVAL_MS = 60_000


class DedupProcessor(UserProcessor):
    """Forwards a record unless its key was forwarded less than ``window_ms`` before it."""

    def __init__(self, window_ms: int = WINDOW_MS, purge_interval_ms: int = PURGE_INTERVAL_MS) -> None:
        self.window_ms = window_ms
        self.purge_interval_ms = purge_interval_ms

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.seen = context.get_state_store(STORE)
        context.schedule(self.purge_interval_ms, STREAM_TIME, self.purge)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        first = self.seen.get(key)
        if first is not None and timestamp - first < self.window_ms:
            return
        self.seen.put(key, timestamp)
        self.context.forward(key, value)

    def purge(self, stream_time: int) -> None:
        old = [k for k, first in self.seen.all() if stream_time - first >= self.window_ms]
        for key in old:
            self.seen.delete(key)


def build(window_ms: int = WINDOW_MS, purge_interval_ms: int = PURGE_INTERVAL_MS, *, input: str = INPUT,
          output: str = OUTPUT) -> Topology:
    """The dedup topology (``window_ms``/``purge_interval_ms`` as in the module docstring; ``input``/
    ``output`` rename the topics)."""
    b = StreamsBuilder()
    b.add_state_store(KeyValueStoreBuilder(STORE, key_serde=serde.STRING, value_serde=serde.INT))
    events = b.stream(input, key_serde=serde.STRING, value_serde=serde.JSON)
    (events.process(lambda: DedupProcessor(window_ms, purge_interval_ms), stores=[STORE], name="dedup")
     .to(output, key_serde=serde.STRING, value_serde=serde.JSON))
    return b.build()


topology = build()
