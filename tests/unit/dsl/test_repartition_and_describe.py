"""Repartitioning after a key change, sub-topologies, naming and describe()."""

from __future__ import annotations

from streamproc import serde
from streamproc.dsl import SessionWindows, StreamsBuilder
from streamproc.engine.task import Task
from streamproc.records import Record, Windowed
from streamproc.testing import TopologyTestDriver


def _rekeyed_count():
    b = StreamsBuilder()
    (b.stream("clicks", key_serde=serde.STRING, value_serde=serde.JSON)
      .select_key(lambda k, v: v["user"])
      .group_by_key()
      .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(100))
      .count(name="per-user")
      .to_stream().to("out"))
    return b.build()


def test_key_change_before_group_by_key_goes_through_a_repartition_topic() -> None:
    topology = _rekeyed_count()
    subs = topology.subtopologies_for("app")
    assert len(subs) == 2
    upstream = next(s for s in subs if "clicks" in s.source_topics)
    downstream = next(s for s in subs if s is not upstream)
    assert upstream.sink_topics == {"app-per-user-repartition"}
    assert downstream.source_topics == {"app-per-user-repartition"}
    assert upstream.repartition_topics == downstream.repartition_topics == {"app-per-user-repartition"}
    assert downstream.store_names == {"per-user"} and not upstream.store_names
    assert downstream.changelog_topics == {"per-user": "app-per-user-changelog"}


def test_repartitioned_records_are_grouped_by_the_new_key_in_the_driver() -> None:
    with TopologyTestDriver(_rekeyed_count(), application_id="app") as d:
        clicks = d.input_topic("clicks")
        clicks.pipe("device-1", {"user": "ann"}, 10)
        clicks.pipe("device-2", {"user": "ann"}, 20)
        clicks.pipe("device-3", {"user": "bob"}, 30)
        assert d.output_topic("out").read_records() == [
            Record(Windowed("ann", 10, 10), 1, 10),
            Record(Windowed("ann", 10, 10), None, 10),
            Record(Windowed("ann", 10, 20), 2, 20),
            Record(Windowed("bob", 30, 30), 1, 30),
        ]
        assert d.input_topics() == ["clicks"]


def test_repartition_topic_round_trips_bytes_between_tasks() -> None:
    topology = _rekeyed_count()
    up, down = Task(topology, 1, 0, "app"), Task(topology, 0, 0, "app")
    if "clicks" not in up.source_topics:
        up, down = down, up
    up.process("clicks", 0, [Record(b"dev", b'{"user":"ann"}', 5, offset=0)])
    (out,) = up.drain_outputs()
    assert out.topic == "app-per-user-repartition"
    assert isinstance(out.key, bytes) and isinstance(out.value, bytes)
    down.process(out.topic, 0, [Record(out.key, out.value, out.timestamp, offset=0)])
    assert [(o.key, o.value) for o in down.drain_outputs()] == [(Windowed("ann", 5, 5), 1)]


def test_no_repartition_without_a_key_change() -> None:
    b = StreamsBuilder()
    (b.stream("in").filter(lambda k, v: True).map_values(str).group_by_key()
      .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count())
    topology = b.build()
    assert len(topology.subtopologies) == 1
    assert not topology.subtopologies[0].repartition_topics


def test_generated_names_are_deterministic_and_name_the_stores() -> None:
    def build():
        b = StreamsBuilder()
        b.stream("in").group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count() \
            .to_stream().to("out")
        return b.build()

    first, second = build(), build()
    assert [n.name for n in first.nodes] == [n.name for n in second.nodes] == [
        "KSTREAM-SOURCE-0000000000", "KSTREAM-AGGREGATE-0000000001", "KTABLE-TOSTREAM-0000000002",
        "KSTREAM-SINK-0000000003"]
    assert set(first.stores) == {"KSTREAM-AGGREGATE-0000000001"}
    assert first.subtopologies_for("x")[0].changelog_topics == {
        "KSTREAM-AGGREGATE-0000000001": "x-KSTREAM-AGGREGATE-0000000001-changelog"}


def test_join_and_table_share_a_subtopology_and_changelog_configs() -> None:
    b = StreamsBuilder()
    rates = b.table("rates", name="rates", versioned=3_600_000)
    b.stream("payments").join(rates, lambda p, r: p, grace=5_000, name="conv").to("out")
    (sub,) = b.build().subtopologies_for("cur")
    assert sub.source_topics == {"rates", "payments"}
    assert sub.store_names == {"rates", "conv-buffer", "conv-progress"}
    assert sub.changelog_configs["cur-rates-changelog"] == {
        "cleanup.policy": "compact", "min.compaction.lag.ms": str(3_600_000 + 86_400_000)}
    assert sub.changelog_configs["cur-conv-buffer-changelog"] == {"cleanup.policy": "compact"}


def test_describe_text_lists_subtopologies_sources_processors_stores_and_sinks() -> None:
    text = _rekeyed_count().describe()
    assert text.startswith("Topologies:")
    assert "Sub-topology: 0" in text and "Sub-topology: 1" in text
    assert "Source: KSTREAM-SOURCE-0000000000 (topics: [clicks])" in text
    assert "Sink: per-user-repartition-sink (topic: per-user-repartition)" in text
    assert "Source: per-user-repartition-source (topics: [per-user-repartition])" in text
    assert "Processor: per-user (session-count; stores: [per-user])" in text
    assert "per-user (session, retention=100 ms, changelog: <application_id>-per-user-changelog)" in text
    assert "Sink: KSTREAM-SINK-" in text and "(topic: out)" in text


def test_describe_mermaid_is_a_flowchart_with_topics_and_stores() -> None:
    topology = _rekeyed_count()
    chart = topology.describe(format="mermaid")
    assert chart == topology.to_mermaid()
    assert chart.startswith("flowchart TD")
    assert 'subgraph sub0["Sub-topology 0"]' in chart and 'subgraph sub1["Sub-topology 1"]' in chart
    assert 't_clicks(["clicks"])' in chart
    assert 's_per_user[("per-user<br/>session store")]' in chart
    assert "n_per_user -.- s_per_user" in chart


def test_built_topology_names_internal_topics_with_its_application_id() -> None:
    b = StreamsBuilder()
    b.stream("in").select_key(lambda k, v: v).group_by_key(name="g").windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(5)).count(name="c")
    topology = b.build(application_id="myapp")
    assert any("myapp-g-repartition" in s.sink_topics for s in topology.subtopologies)
    assert "topic: myapp-g-repartition" in topology.describe()


def test_a_built_topology_does_not_change_when_the_builder_goes_on() -> None:
    b = StreamsBuilder()
    s = b.stream("in")
    s.to("out")
    first = b.build()
    s.map_values(str).to("out2")
    assert first.sink_topics() == {"out"} and b.build().sink_topics() == {"out", "out2"}
    with TopologyTestDriver(first) as d:
        d.input_topic("in").pipe("k", 1, 1)
        assert d.output_topic("out").read_values() == [1]
