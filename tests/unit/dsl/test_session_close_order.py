"""Sessions emitted on window close by one record come out ordered by end, then start, then key
(found by the conformance suite: scenario ``session`` 191 of seed 0, where ``c@[7,8]`` and
``b@[8,8]`` close together; Kafka Streams emits ``c@[7,8]`` first, as we do now)."""

from __future__ import annotations

from streamproc.dsl import EmitStrategy, SessionWindows, StreamsBuilder
from streamproc.records import Windowed
from streamproc.testing import TopologyTestDriver


def _topology():  # type: ignore[no-untyped-def]
    b = StreamsBuilder()
    (b.stream("in").group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 8))
     .count(name="agg", emit=EmitStrategy.ON_WINDOW_CLOSE).to_stream().to("out"))
    return b.build()


def test_sessions_closing_together_come_out_by_end_then_start_then_key() -> None:
    with TopologyTestDriver(_topology()) as d:
        pipe = d.input_topic("in").pipe
        pipe("b", "y", 8)
        pipe("c", "x", 7)
        pipe("c", "x", 8)
        pipe("a", "z", 8)           # [8,8]: same end and start as b, key sorts first
        pipe("a", "w", 25)          # close time 25 - 5 - 8 = 12 > 8: all three close
        out = [(r.key, r.value, r.timestamp) for r in d.output_topic("out").read_records()]
    assert out == [(Windowed("c", 7, 8), 2, 8), (Windowed("a", 8, 8), 1, 8), (Windowed("b", 8, 8), 1, 8)]
