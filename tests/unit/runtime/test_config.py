"""Config: one declaration per setting; precedence flag > env > file > default; clear errors."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from streamproc.config import Config, ConfigError, settings


def test_defaults_and_required_application_id() -> None:
    with pytest.raises(ConfigError, match="application_id is required.*--application-id.*STREAMPROC_APPLICATION_ID"):
        Config.load(env={})
    c = Config.load(flags={"application_id": "app"}, env={})
    assert c.commit_interval_ms == 1000
    assert c.processing_guarantee == "at_least_once"
    assert c.auto_offset_reset == "earliest"
    assert c.dead_letter_topic == "app-dlq"
    assert c.loop == "uvloop"


def test_precedence_flag_over_env_over_file_over_default(tmp_path: Path) -> None:
    f = tmp_path / "app.toml"
    f.write_text('application_id = "from-file"\ncommit_interval_ms = 300\npoll_timeout_ms = 50\n'
                 'max_poll_records = 7\n[producer]\nlinger_ms = 20\n')
    env = {"STREAMPROC_COMMIT_INTERVAL_MS": "200", "STREAMPROC_POLL_TIMEOUT_MS": "40"}
    c = Config.load(flags={"commit_interval_ms": "100"}, env=env, file=f)
    assert c.application_id == "from-file"
    assert c.commit_interval_ms == 100  # flag
    assert c.poll_timeout_ms == 40  # env
    assert c.max_poll_records == 7  # file
    assert c.delivery_timeout_ms == 120_000  # default
    assert c.producer_config == {"linger_ms": 20}


def test_properties_file_and_config_file_env(tmp_path: Path) -> None:
    f = tmp_path / "app.properties"
    f.write_text("# comment\napplication.id=props\ncommit.interval.ms=250\nproducer.linger.ms=3\n"
                 "consumer.fetch.max.wait.ms=50\nprocessing-error-policy=dead_letter\n")
    c = Config.load(env={"STREAMPROC_CONFIG": str(f)})
    assert (c.application_id, c.commit_interval_ms) == ("props", 250)
    assert c.producer_config == {"linger_ms": 3}
    assert c.consumer_config == {"fetch_max_wait_ms": 50}
    assert c.processing_error_policy == "dead-letter"


def test_bad_values_name_setting_value_and_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"commit_interval_ms \(from flag --commit-interval-ms\): 'soon' is not an integer"):
        Config.load(flags={"application_id": "a", "commit_interval_ms": "soon"}, env={})
    with pytest.raises(ConfigError, match=r"metrics_port \(from env STREAMPROC_METRICS_PORT\): 70000"):
        Config.load(flags={"application_id": "a"}, env={"STREAMPROC_METRICS_PORT": "70000"})
    with pytest.raises(ConfigError, match=r"deserialization_error_policy.*'drop' is not one of fail, skip, dead-letter"):
        Config.load(flags={"application_id": "a", "deserialization_error_policy": "drop"}, env={})
    with pytest.raises(ConfigError, match="unknown producer setting 'lingerms'"):
        Config.load(flags={"application_id": "a", "producer_config": ["lingerms=5"]}, env={})
    with pytest.raises(ConfigError, match="'group_id' is managed by streamproc"):
        Config.load(flags={"application_id": "a", "consumer_config": ["group_id=x"]}, env={})
    with pytest.raises(ConfigError, match="'app id!' is not a valid application id"):
        Config(application_id="app id!")
    bad = tmp_path / "bad.toml"
    bad.write_text("commit_intervall_ms = 5\n")
    with pytest.raises(ConfigError, match="unknown setting 'commit_intervall_ms'"):
        Config.load(env={}, file=bad)
    with pytest.raises(ConfigError, match="does not exist"):
        Config.load(env={}, file=tmp_path / "missing.toml")


def test_exactly_once_needs_acks_all() -> None:
    assert Config(application_id="a", processing_guarantee="exactly_once_v2").processing_guarantee == "exactly_once_v2"
    with pytest.raises(ConfigError, match="acks=1.*cannot be used with processing_guarantee=exactly_once_v2"):
        Config(application_id="a", processing_guarantee="exactly_once_v2", producer_config={"acks": 1})


def test_each_setting_declared_once_with_doc_env_and_flag() -> None:
    rows = settings()
    names = [r.name for r in rows]
    assert len(names) == len(set(names))
    for r in rows:
        assert r.doc and r.env == "STREAMPROC_" + r.name.upper() and r.flag.startswith("--")
    assert {"application_id", "bootstrap_servers", "commit_interval_ms", "processing_guarantee",
            "delivery_timeout_ms", "changelog_enabled", "metrics_port", "producer_config",
            "consumer_config", "deserialization_error_policy", "processing_error_policy"} <= set(names)


def test_overrides_parse_values() -> None:
    c = Config(application_id="a", producer_config="linger_ms=5,acks=all,enable_idempotence=false",
               consumer_config={"fetch.max.wait.ms": "10"})
    assert c.producer_config == {"linger_ms": 5, "acks": "all", "enable_idempotence": False}
    assert c.consumer_config == {"fetch_max_wait_ms": 10}
    assert Config(application_id="a", metrics_port="none").metrics_port == 0


def test_docs_list_every_setting() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "docs" / "running.md").read_text()
    for r in settings():
        assert f"| `{r.name}` | `{r.flag}` | `{r.env}` |" in text, r.name


def test_topic_config_from_every_source(tmp_path: Path) -> None:
    c = Config.load(flags={"application_id": "a", "topic_config": ["min.insync.replicas=2",
                                                                    "cleanup.policy=compact,delete"]}, env={})
    assert c.topic_config == {"min.insync.replicas": "2", "cleanup.policy": "compact,delete"}
    env = {"STREAMPROC_TOPIC_CONFIG": "min.insync.replicas=2,cleanup.policy=compact,delete,compression.type=lz4"}
    assert Config.load(flags={"application_id": "a"}, env=env).topic_config == {
        "min.insync.replicas": "2", "cleanup.policy": "compact,delete", "compression.type": "lz4"}
    toml = tmp_path / "app.toml"
    toml.write_text('application_id = "a"\n[topic_config]\nmin.insync.replicas = 2\n"segment.ms" = 600000\n'
                    'unclean_leader_election_enable = false\n')
    assert Config.load(env={}, file=toml).topic_config == {
        "min.insync.replicas": "2", "segment.ms": "600000", "unclean.leader.election.enable": "false"}
    props = tmp_path / "app.properties"
    props.write_text("application.id=a\ntopic.min.insync.replicas=2\ntopic.creation.timeout.ms=5000\n")
    c = Config.load(env={}, file=props)
    assert (c.topic_config, c.topic_creation_timeout_ms) == ({"min.insync.replicas": "2"}, 5000)
    assert Config(application_id="a").topic_config == {}


def test_unknown_topic_config_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"topic_config \(from flag --topic-config\): unknown Kafka topic config "
                                          r"'min.isr'; .*the topic configs are: cleanup.policy, "):
        Config.load(flags={"application_id": "a", "topic_config": ["min.isr=2"]}, env={})
    with pytest.raises(ConfigError, match=r"unknown Kafka topic config 'min.insync.replica'; did you mean "
                                          r"'min.insync.replicas'\?"):
        Config.load(flags={"application_id": "a"}, env={"STREAMPROC_TOPIC_CONFIG": "min.insync.replica=2"})
    with pytest.raises(ConfigError, match="'retention' is not key=value"):
        Config.load(flags={"application_id": "a"}, env={"STREAMPROC_TOPIC_CONFIG": "retention"})
    with pytest.raises(ConfigError, match="replication_factor: 0 must be -1 or a positive integer"):
        Config(application_id="a", replication_factor=0)


def test_client_override_values_are_checked_naming_key_and_value() -> None:
    bad = {
        ("producer_config", "linger.ms=abc"): "producer setting linger.ms='abc' must be a non-negative integer",
        ("producer_config", "enable.idempotence=maybe"): "enable.idempotence='maybe' must be true or false",
        ("producer_config", "compression.type=brotli"): "compression.type='brotli' must be one of None, 'gzip'",
        ("producer_config", "acks=2"): "acks='2' must be one of 0, 1, -1, 'all'",
        ("consumer_config", "max.poll.records=-5"): "max.poll.records='-5' must be a non-negative integer",
        ("consumer_config", "isolation.level=dirty"): "isolation.level='dirty' must be one of 'read_uncommitted'",
        ("consumer_config", "partition.assignment.strategy=range"): "cannot be set from a setting",
    }
    for (setting, override), message in bad.items():
        with pytest.raises(ConfigError, match=re.escape(message)):
            Config.load({"application_id": "a", setting: [override]}, env={})
    ok = Config.load({"application_id": "a", "producer_config": ["linger.ms=10", "acks=1", "compression_type=lz4"],
                      "consumer_config": ["max_poll_records=500", "fetch.max.wait.ms=100"]}, env={})
    assert ok.producer_config == {"linger_ms": 10, "acks": 1, "compression_type": "lz4"}
    assert ok.consumer_config == {"max_poll_records": 500, "fetch_max_wait_ms": 100}


def test_a_streamproc_variable_that_names_no_setting_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    env = {"STREAMPROC_COMIT_INTERVAL_MS": "5", "STREAMPROC_PURE_PYTHON": "1", "STREAMPROC_ZZZ": "1",
           "STREAMPROC_LOG_LEVEL": "debug", "OTHER": "x"}
    with caplog.at_level("WARNING", logger="streamproc.config"):
        Config.load({"application_id": "a"}, env=env)
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        ("environment variable STREAMPROC_COMIT_INTERVAL_MS names no streamproc setting and is ignored; did you "
         "mean STREAMPROC_COMMIT_INTERVAL_MS?"),
        ("environment variable STREAMPROC_ZZZ names no streamproc setting and is ignored; `streamproc run --help` "
         "lists the settings"),
    ]


def test_an_unknown_client_setting_names_the_closest_one_and_only_settable_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown producer setting 'lingr_ms'; did you mean 'linger_ms'\?") as info:
        Config.load({"application_id": "a", "producer_config": ["lingr_ms=5"]}, env={})
    listed = str(info.value).split("that can be set: ")[1]
    assert "linger_ms" in listed and "transactional_id" not in listed and "ssl_context" not in listed
