"""Topic planning: partition counts, co-partitioning errors, internal topics."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder
from streamproc.dsl.options import Joined
from streamproc.errors import TopologyError
from streamproc.runtime.topics import plan_topics
from topologies import currency, sessions


def subs(topology, app="app"):
    def key_serdes(s):
        return {t: getattr(topology.source_serdes(t, app)[0], "name", None) for t in s.source_topics}

    return [NS(id=s.id, source_topics=s.source_topics, sink_topics=s.sink_topics,
               repartition_topics=s.repartition_topics, changelog_topics=s.changelog_topics,
               key_serdes=key_serdes(s))
            for s in topology.subtopologies_for(app)]


def test_sessions_plan() -> None:
    plan = plan_topics(subs(sessions.build()), {"clicks": 8}, {"app-session-clicks-changelog": {"cleanup.policy": "x"}})
    assert plan.subtopology_partitions == {0: 8}
    assert plan.source_topics == ["clicks"]
    assert plan.outputs["session-stats"].partitions == 8
    log = plan.outputs["app-session-clicks-changelog"]
    assert (log.partitions, log.kind, dict(log.configs)) == (8, "changelog", {"cleanup.policy": "x"})
    missing = {s.name for s in plan.missing({"clicks": 8})}
    assert {"app-session-clicks-changelog", "session-stats"} <= missing
    assert "clicks" not in missing


def test_currency_plan_repartition_gets_the_writers_count() -> None:
    plan = plan_topics(subs(currency.build()), {"rates": 6, "payments": 6}, dead_letter_topic="app-dlq")
    assert plan.outputs["app-convert-repartition"].partitions == 6
    assert plan.outputs["app-convert-repartition"].kind == "repartition"
    assert plan.outputs["app-dlq"].partitions == 6
    assert plan.subtopology_partitions == {0: 6, 1: 6}
    assert plan.outputs["payments-eur"].partitions == 6


def test_co_partitioning_mismatch_names_topics_and_counts() -> None:
    with pytest.raises(TopologyError, match=r"must be co-partitioned.*'app-convert-repartition' \(8 partitions\), "
                                            r"'rates' \(4 partitions\)"):
        plan_topics(subs(currency.build()), {"rates": 4, "payments": 8})


def test_missing_source_topic() -> None:
    with pytest.raises(TopologyError, match="source topic\\(s\\) 'clicks' of sub-topology 0 do not exist"):
        plan_topics(subs(sessions.build()), {})


def test_existing_topics_keep_their_counts_and_bad_internal_counts_fail() -> None:
    plan = plan_topics(subs(sessions.build()), {"clicks": 8, "session-stats": 3})
    assert plan.outputs["session-stats"].partitions == 3
    with pytest.raises(TopologyError, match="changelog topic 'app-session-clicks-changelog' has 2 partitions"):
        plan_topics(subs(sessions.build()), {"clicks": 8, "app-session-clicks-changelog": 2})
    with pytest.raises(TopologyError, match="'app-convert-repartition' \\(3 partitions\\)"):
        plan_topics(subs(currency.build()), {"rates": 4, "payments": 4, "app-convert-repartition": 3})


def test_rekeyed_join_repartitions_with_the_tables_key_serde() -> None:
    topology = currency.build()
    assert topology.source_serdes("app-convert-repartition", "app")[0] is serde.STRING
    plan_topics(subs(topology), {"rates": 4, "payments": 4})  # co-partitioned by the same key bytes


def _rekeyed_join(table_key_serde):
    b = StreamsBuilder()
    rates = b.table("rates", name="rates", versioned=1000, key_serde=table_key_serde, value_serde=serde.JSON)
    (b.stream("payments", key_serde=serde.STRING, value_serde=serde.JSON)
      .select_key(lambda k, v: v["currency"]).join(rates, lambda p, r: r, name="convert").to("out"))
    return b.build()


def test_join_key_serde_other_than_the_tables_is_rejected() -> None:
    b = StreamsBuilder()
    rates = b.table("rates", versioned=1000, key_serde=serde.STRING)
    stream = b.stream("payments").select_key(lambda k, v: v)
    with pytest.raises(ValueError, match="key_serde 'json' differs from the table's key serde 'string'"):
        stream.join(rates, lambda p, r: r, joined=Joined(key_serde=serde.JSON))


def test_table_without_key_serde_cannot_be_joined_after_a_rekey_in_the_daemon() -> None:
    with pytest.raises(TopologyError, match=r"key serdes differ: 'app-convert-repartition' \(repartition, key serde "
                                            r"json-or-bytes-key\), 'rates' \(key serde none \(raw bytes\)\)"):
        plan_topics(subs(_rekeyed_join(None)), {"rates": 2, "payments": 2})
    plan_topics(subs(_rekeyed_join(serde.STRING)), {"rates": 2, "payments": 2})
