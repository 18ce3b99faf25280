"""Topic planning: partition counts, co-partitioning errors, internal topics."""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder
from streamproc.dsl.options import Joined
from streamproc.errors import TopicSetupError, TopologyError
from streamproc.runtime.topics import TopicState, apply_topic_config, check_existing_topics, plan_topics
from topologies import currency, sessions, wordcount


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
    with pytest.raises(TopicSetupError, match="source topic\\(s\\) 'clicks' of sub-topology 0 do not exist"):
        plan_topics(subs(sessions.build()), {})


def test_existing_topics_keep_their_counts_and_bad_internal_counts_fail() -> None:
    plan = plan_topics(subs(sessions.build()), {"clicks": 8, "session-stats": 3})
    assert plan.outputs["session-stats"].partitions == 3
    with pytest.raises(TopologyError, match="'app-convert-repartition' \\(3 partitions\\)"):  # co-partitioning
        plan_topics(subs(currency.build()), {"rates": 4, "payments": 4, "app-convert-repartition": 3})
    log = "app-session-clicks-changelog"
    plan = plan_topics(subs(sessions.build()), {"clicks": 8, log: 2}, {log: {"cleanup.policy": "compact,delete"}},
                       changelog_stores={log: "session store 'session-clicks'"})
    errors, warnings = check_existing_topics(plan, {log: TopicState(2, 3, {"cleanup.policy": "delete,compact"})}, 3)
    assert errors == [(f"changelog topic {log!r} has 2 partition(s) but its session store 'session-clicks' has 8 "
                      f"tasks, one changelog partition each; add partitions (kafka-topics.sh --alter --topic {log} "
                      f"--partitions 8) or delete the topic so the daemon creates it")]
    assert warnings == []


def _wordcount_plan(existing):
    log, rep = "app-word-counts-store-changelog", "app-words-repartition"
    plan = plan_topics(subs(wordcount.build()), {"sentences": 4, **existing},
                       {log: {"cleanup.policy": "compact"}}, changelog_stores={log: "key-value store 'word-counts-store'"})
    return plan, log, rep


def test_existing_internal_topics_checked_one_line_each() -> None:
    plan, log, rep = _wordcount_plan({"app-word-counts-store-changelog": 2, "app-words-repartition": 3,
                                      "word-counts": 4})
    states = {log: TopicState(2, 1, {"cleanup.policy": "delete"}), rep: TopicState(3, 3, {"cleanup.policy": "delete"}),
              "word-counts": TopicState(4, 2, {})}
    errors, warnings = check_existing_topics(plan, states, 3, "replication_factor=-1: the cluster's default")
    assert len(errors) == 3, errors
    assert errors[0].startswith(f"changelog topic {log!r} has cleanup.policy=delete but its key-value store "
                                f"'word-counts-store' needs cleanup.policy=compact")
    assert "--add-config cleanup.policy=[compact]" in errors[0]
    assert errors[1].startswith(f"changelog topic {log!r} has 2 partition(s) but its key-value store")
    assert errors[2].startswith(f"repartition topic {rep!r} has 3 partition(s) but its writing sub-topology has 4 "
                                f"tasks")
    assert warnings == [
        (f"changelog topic {log!r} has replication factor 1, below the 3 asked (replication_factor=-1: the cluster's "
        f"default); the daemon does not change existing topics: add replicas with kafka-reassign-partitions.sh if it "
        f"was not chosen"),
        ("output topic 'word-counts' has replication factor 2, below the 3 asked (replication_factor=-1: the "
        "cluster's default); the daemon does not change existing topics: add replicas with "
        "kafka-reassign-partitions.sh if it was not chosen")]
    # what fits passes: the right policy (in any order), enough partitions, replication as asked
    good = {log: TopicState(4, 3, {"cleanup.policy": "compact"}), rep: TopicState(4, 3, {})}
    assert check_existing_topics(plan, good, 3) == ([], [])
    assert check_existing_topics(plan, states, None)[1] == []  # factor unknown: not checked


def test_topic_config_applies_under_the_daemons_required_configs() -> None:
    plan, log, rep = _wordcount_plan({})
    apply_topic_config(plan, {"min.insync.replicas": "2", "segment.ms": "60000"})
    assert dict(plan.outputs[log].configs) == {"cleanup.policy": "compact", "min.insync.replicas": "2",
                                               "segment.ms": "60000"}
    assert dict(plan.outputs[rep].configs) == {"cleanup.policy": "delete", "retention.ms": "-1",
                                               "segment.ms": "60000", "min.insync.replicas": "2"}
    assert dict(plan.outputs["word-counts"].configs) == {"min.insync.replicas": "2", "segment.ms": "60000"}


def test_topic_config_changing_a_required_config_is_refused_naming_it() -> None:
    plan, log, rep = _wordcount_plan({})
    with pytest.raises(TopicSetupError) as info:
        apply_topic_config(plan, {"cleanup.policy": "compact"})
    assert str(info.value) == (
        f"topic_config cleanup.policy=compact cannot apply to repartition topic {rep!r}: the daemon needs "
        f"cleanup.policy=delete (the daemon sets it on the topics it creates); remove cleanup.policy from topic_config")
    with pytest.raises(TopicSetupError, match=f"topic_config cleanup.policy=delete cannot apply to changelog topic "
                                              f"'{log}': its key-value store 'word-counts-store' needs "
                                              f"cleanup.policy=compact"):
        apply_topic_config(_wordcount_plan({})[0], {"cleanup.policy": "delete"})
    sess = plan_topics(subs(sessions.build()), {"clicks": 2},
                       {"app-session-clicks-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "99"}})
    with pytest.raises(TopicSetupError, match="topic_config retention.ms=1000 cannot apply to changelog topic"):
        apply_topic_config(sess, {"retention.ms": "1000"})
    apply_topic_config(sess, {"cleanup.policy": "delete, compact"})  # the same policy: accepted


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
