"""topologies/sessions.py through the TopologyTestDriver (string keys, JSON values)."""

from __future__ import annotations

from datetime import timedelta

from streamproc.dsl import EmitStrategy
from streamproc.records import Record
from streamproc.testing import TopologyTestDriver
from topologies import sessions

MIN = 60_000


def _stats(user, start, end, clicks):
    return {"user": user, "start": start, "end": end, "clicks": clicks, "duration_ms": end - start}


def test_one_record_per_closed_session_with_count_and_duration() -> None:
    with TopologyTestDriver(sessions.build(), application_id="sessions") as d:
        clicks = d.input_topic(sessions.INPUT)
        clicks.pipe("ann", {"page": "/"}, 0)
        clicks.pipe("ann", {"page": "/cart"}, 10 * MIN)
        clicks.pipe("bob", {"page": "/"}, 12 * MIN)
        clicks.pipe("ann", {"page": "/pay"}, 39 * MIN)         # within 30 min of 10 min: same session
        clicks.pipe("ann", {"page": "/late"}, 5 * MIN)         # out of order, inside the session
        out = d.output_topic(sessions.OUTPUT)
        assert out.read_records() == []                          # nothing closed yet
        clicks.pipe("carl", {"page": "/"}, 12 * MIN + 35 * MIN + 1)  # closes bob's session (end 12 min)
        assert out.read_records() == [Record("bob", _stats("bob", 12 * MIN, 12 * MIN, 1), 12 * MIN)]
        clicks.pipe("carl", {"page": "/x"}, 39 * MIN + 35 * MIN + 1)  # closes ann's
        assert out.read_records() == [Record("ann", _stats("ann", 0, 39 * MIN, 4), 39 * MIN)]
        assert d.session_store(sessions.STORE).fetch_session("carl", 47 * MIN + 1, 74 * MIN + 1) == 2


def test_late_clicks_beyond_grace_are_dropped_and_counted() -> None:
    topology = sessions.build(gap=timedelta(minutes=1), grace=timedelta(seconds=30))
    with TopologyTestDriver(topology) as d:
        clicks = d.input_topic("clicks")
        clicks.pipe("ann", {}, 10 * MIN)
        clicks.pipe("ann", {}, 10 * MIN - 2 * MIN)   # 8 min < close time 10 - 1.5 min: late
        assert d.metrics["dropped_records_late"] == 1


def test_on_window_update_variant_emits_every_update_but_no_tombstones() -> None:
    topology = sessions.build(gap=100, grace=0, emit=EmitStrategy.ON_WINDOW_UPDATE)
    with TopologyTestDriver(topology) as d:
        d.input_topic("clicks").pipe("ann", {}, 0)
        d.input_topic("clicks").pipe("ann", {}, 50)
        assert d.output_topic("session-stats").read_values() == [_stats("ann", 0, 0, 1), _stats("ann", 0, 50, 2)]


def test_module_documents_topics_and_exposes_build() -> None:
    assert "clicks" in sessions.__doc__ and "session-stats" in sessions.__doc__
    topology = sessions.build()
    assert topology.source_topics() == {"clicks"} and topology.sink_topics() == {"session-stats"}
    key_serde, value_serde = topology.source_serdes("clicks")
    assert (key_serde.name, value_serde.name) == ("string", "json")
