"""Processor API: KStream.process with user stores, forward (incl. to=), punctuation on stream time
and wall-clock time (Kafka Streams' rule: once per advance, missed intervals skipped), record
metadata, restore from changelogs, describe, errors; the dedup example against a model."""

from __future__ import annotations

import random

import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder
from streamproc.errors import ProcessingError
from streamproc.processor import STREAM_TIME, WALL_CLOCK_TIME, KeyValueStoreBuilder, UserProcessor
from streamproc.testing import TopologyTestDriver
from topologies import dedup


def _kv(d: TopologyTestDriver, topic: str = "out"):
    return [(r.key, r.value, r.timestamp) for r in d.output_topic(topic).read_records()]


class Counter(UserProcessor):
    """Counts per key in store "counts", forwards (key, count); even counts also to "evens" only."""

    def init(self, context):
        super().init(context)
        self.store = context.get_state_store("counts")

    def process(self, key, value, timestamp):
        n = (self.store.get(key) or 0) + 1
        self.store.put(key, n)
        if n % 2 == 0:
            self.context.forward(key, n, to="evens-sink")
        else:
            self.context.forward(key, n)


def counter_topology():
    b = StreamsBuilder()
    b.add_state_store(KeyValueStoreBuilder("counts", serde.STRING, serde.INT))
    out = b.stream("in").process(Counter, stores=["counts"], name="counter")
    out.to("out", name="out-sink")
    out.to("evens", name="evens-sink")
    return b.build()


def test_forward_all_children_and_to_a_named_child():
    with TopologyTestDriver(counter_topology()) as d:
        for i, k in enumerate("aabab"):
            d.input_topic("in").pipe(k, "x", 10 + i)
        assert _kv(d) == [("a", 1, 10), ("b", 1, 12), ("a", 3, 13)]
        assert _kv(d, "evens") == [("a", 1, 10), ("a", 2, 11), ("b", 1, 12), ("a", 3, 13), ("b", 2, 14)]


def test_user_store_is_change_logged_and_restored():
    t = counter_topology()
    with TopologyTestDriver(t) as d:
        for k in "aab":
            d.input_topic("in").pipe(k, "x", 5)
        changelogs = d.changelogs()
        assert set(changelogs) >= {"counts"} or any("counts" in n for n in changelogs)
    with TopologyTestDriver(t, changelogs=changelogs) as d2:
        d2.input_topic("in").pipe("a", "x", 6)
        d2.input_topic("in").pipe("b", "x", 7)
        assert _kv(d2, "evens") == [("a", 3, 6), ("b", 2, 7)]


class Clock(UserProcessor):
    def __init__(self, kind, cancel_after=None):
        self.kind, self.cancel_after = kind, cancel_after

    def init(self, context):
        super().init(context)
        self.fired = 0
        self.handle = context.schedule(10, self.kind, self.tick)

    def tick(self, now):
        self.fired += 1
        self.context.forward("tick", now)
        if self.cancel_after is not None and self.fired >= self.cancel_after:
            self.handle.cancel()

    def process(self, key, value, timestamp):
        self.context.forward(key, (value, self.context.topic, self.context.offset, self.context.timestamp,
                                   tuple(self.context.headers)))


def clock_topology(kind, cancel_after=None):
    b = StreamsBuilder()
    b.stream("in").process(lambda: Clock(kind, cancel_after)).to("out")
    return b.build()


def test_stream_time_punctuation_fires_once_per_advance_aligned_to_zero():
    with TopologyTestDriver(clock_topology(STREAM_TIME)) as d:
        pipe = d.input_topic("in").pipe
        pipe("k", 1, 3)    # first record: due 0 -> fires with 3, next due 10
        pipe("k", 2, 9)    # no boundary
        pipe("k", 3, 35)   # crosses 10, 20, 30: fires once with 35, next due 40
        pipe("k", 4, 20)   # out of order: stream time stays 35
        pipe("k", 5, 40)   # fires with 40
        ticks = [(k, v) for k, v, _ in _kv(d) if k == "tick"]
        assert ticks == [("tick", 3), ("tick", 35), ("tick", 40)]


def test_wall_clock_punctuation_and_cancel():
    with TopologyTestDriver(clock_topology(WALL_CLOCK_TIME, cancel_after=2), initial_wall_clock_ms=1000) as d:
        d.input_topic("in").pipe("k", 1, 5)
        assert [k for k, _, _ in _kv(d)] == ["k"]
        d.advance_wall_clock(5)     # first tick seen at 1005: due 1015
        d.advance_wall_clock(10)    # 1015: fires
        d.advance_wall_clock(25)    # 1040: fires once (missed 1025, 1035), then cancelled
        d.advance_wall_clock(100)
        assert [(k, v, ts) for k, v, ts in _kv(d)] == [("tick", 1015, 1015), ("tick", 1040, 1040)]


def test_record_metadata():
    with TopologyTestDriver(clock_topology(STREAM_TIME)) as d:
        d.input_topic("in").pipe("k", "v", 7, headers=[("h", b"1")])
        recs = [(k, v) for k, v, _ in _kv(d) if k == "k"]
        assert recs == [("k", ("v", "in", 0, 7, (("h", b"1"),)))]


class Boom(UserProcessor):
    def process(self, key, value, timestamp):
        raise RuntimeError(f"bad {value}")


def test_user_error_is_a_processing_error_naming_the_operator():
    b = StreamsBuilder()
    b.stream("in").process(Boom, name="boom").to("out")
    with (TopologyTestDriver(b.build()) as d,
          pytest.raises(ProcessingError, match=r"process\(\) of operator 'boom' raised RuntimeError: bad 1")):
        d.input_topic("in").pipe("k", 1, 0)


def test_bad_arguments():
    b = StreamsBuilder()
    s = b.stream("in")
    with pytest.raises(ValueError, match="not a state store of this builder"):
        s.process(Counter, stores=["nope"])
    with pytest.raises(ValueError, match="list of store names"):
        s.process(Counter, stores="counts")
    with pytest.raises(ValueError, match="KeyValueStoreBuilder"):
        b.add_state_store("counts")  # type: ignore[arg-type]

    class Unlisted(UserProcessor):
        def init(self, context):
            context.get_state_store("other")

        def process(self, key, value, timestamp):
            pass

    b2 = StreamsBuilder()
    b2.add_state_store(KeyValueStoreBuilder("other"))
    b2.stream("in").process(Unlisted, name="u").to("out")
    with TopologyTestDriver(b2.build()) as d, pytest.raises(ProcessingError, match="has no store 'other'"):
        d.input_topic("in").pipe("k", 1, 0)

    class BadTo(UserProcessor):
        def process(self, key, value, timestamp):
            self.context.forward(key, value, to="missing")

    b3 = StreamsBuilder()
    b3.stream("in").process(BadTo).to("out")
    with TopologyTestDriver(b3.build()) as d, pytest.raises((ValueError, ProcessingError), match="no child"):
        d.input_topic("in").pipe("k", 1, 0)


def test_describe_shows_process_node_and_store():
    t = counter_topology()
    text = t.describe()
    assert "Processor: counter (process; stores: [counts])" in text
    mermaid = t.describe(format="mermaid")
    assert 'n_counter["counter<br/>process"]' in mermaid
    assert 's_counts[("counts<br/>key_value store")]' in mermaid
    assert "n_counter -.- s_counts" in mermaid


def dedup_model(events, window, interval):
    """The documented rule, with the purge as Kafka Streams' stream-time punctuation runs it: once
    when stream time reaches the next boundary (aligned to 0), missed boundaries skipped."""
    seen, out, stream, due = {}, [], -1, 0
    for k, v, ts in events:
        if not (k in seen and ts - seen[k] < window):
            seen[k] = ts
            out.append((k, v, ts))
        stream = max(stream, ts)
        if stream >= due:
            seen = {key: f for key, f in seen.items() if stream - f < window}
            due = (stream // interval + 1) * interval
    return out


@pytest.mark.parametrize("seed", range(5))
def test_dedup_equals_model_and_restarts(seed):
    rng = random.Random(seed)
    events, ts = [], 0
    for i in range(300):
        ts += rng.choice([0, 1, 5, 20, -7])
        events.append((f"id{rng.randrange(15)}", {"i": i}, max(ts, 0)))
    topo = dedup.build(window_ms=50, purge_interval_ms=30)
    with TopologyTestDriver(topo) as d:
        for k, v, t in events[:150]:
            d.input_topic(dedup.INPUT).pipe(k, v, t)
        first = _kv(d, dedup.OUTPUT)
        changelogs = d.changelogs()
    with TopologyTestDriver(topo, changelogs=changelogs) as d2:
        for k, v, t in events[150:]:
            d2.input_topic(dedup.INPUT).pipe(k, v, t)
        second = _kv(d2, dedup.OUTPUT)
    assert first + second == dedup_model(events, 50, 30)


def test_dedup_purge_empties_the_store():
    topo = dedup.build(window_ms=50, purge_interval_ms=30)
    with TopologyTestDriver(topo) as d:
        for i in range(10):
            d.input_topic(dedup.INPUT).pipe(f"id{i}", {}, i)
        d.input_topic(dedup.INPUT).pipe("late", {}, 200)
        assert [kv[0] for kv in d.state_store(dedup.STORE).all()] == ["late"]


def test_a_processor_class_without_process_is_refused_when_the_topology_is_built() -> None:
    class Incomplete(UserProcessor):
        pass

    with pytest.raises(ValueError, match=r"Incomplete does not define process"):
        StreamsBuilder().stream("a").process(Incomplete)
