"""Daemon configuration: every setting declared once, with its default, environment variable and doc.

The table is the :class:`Config` dataclass itself: each field is declared with :func:`_setting`,
which records the parser, the doc and the choices. The CLI flags (``--commit-interval-ms``), the
environment variables (``STREAMPROC_COMMIT_INTERVAL_MS``), the config-file keys
(``commit_interval_ms`` in TOML, ``commit.interval.ms`` or ``commit_interval_ms`` in a
``.properties`` file) and the table in ``docs/running.md`` are all derived from it.

Precedence, highest first: CLI flag > ``STREAMPROC_*`` environment variable > config file >
default. A value that does not parse raises :class:`ConfigError` naming the setting, the value and
where it came from::

    >>> Config.load(flags={"application_id": "a", "commit_interval_ms": "soon"})
    Traceback (most recent call last):
    ...
    streamproc.config.ConfigError: commit_interval_ms (from flag --commit-interval-ms): 'soon' is not an integer

Producer and consumer overrides are maps of aiokafka constructor arguments; keys may use Kafka's
dotted spelling (``linger.ms`` is ``linger_ms``). From the CLI: ``--producer-config linger_ms=10``
(repeatable); from the environment: ``STREAMPROC_PRODUCER_CONFIG="linger_ms=10,acks=all"``; from a
TOML file: a ``[producer_config]`` table; from a properties file: ``producer.linger.ms=10``.

``topic_config`` is a map of Kafka topic configs (dotted names, checked against
:data:`streamproc.topic_config.TOPIC_CONFIG_NAMES`) for the topics the daemon creates, given the
same ways: ``--topic-config min.insync.replicas=2`` (repeatable; one pair per flag, so
``--topic-config cleanup.policy=compact,delete`` works), ``STREAMPROC_TOPIC_CONFIG=
"min.insync.replicas=2,compression.type=lz4"`` (a part without ``=`` continues the previous value:
``cleanup.policy=compact,delete``), a ``[topic_config]`` TOML table, ``topic.min.insync.replicas=2``
in a properties file.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import logging
import os
import re
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from .errors import StreamprocError
from .topic_config import normalize_topic_config

__all__ = ["CONFIG_FILE_ENV", "ENV_PREFIX", "Config", "ConfigError", "SettingInfo", "settings"]

ENV_PREFIX = "STREAMPROC_"
#: Environment variable naming a config file (the ``--config`` flag wins over it).
CONFIG_FILE_ENV = "STREAMPROC_CONFIG"
#: ``STREAMPROC_*`` variables that are not settings: read by the compiled-module loader, the set-up
#: and test scripts, the benchmarks. Any other ``STREAMPROC_*`` variable that names no setting is
#: warned about (a misspelt setting would otherwise be ignored silently).
OTHER_ENV = frozenset({
    "STREAMPROC_PURE_PYTHON", "STREAMPROC_NO_COMPILE", "STREAMPROC_CACHE", "STREAMPROC_VENV",
    "STREAMPROC_KAFKA_VERSION", "STREAMPROC_KAFKA_STREAMS_VERSION", "STREAMPROC_KAFKA_DATA",
    "STREAMPROC_PEER_VENVS", "STREAMPROC_SPARK_RECORDS", "STREAMPROC_FAULT_KILLS", "STREAMPROC_FAULT_RECORDS",
    "STREAMPROC_FAULT_SEED", "STREAMPROC_DAEMON_TEST_RECORDS", "STREAMPROC_DAEMON_REBALANCE_RECORDS",
    "STREAMPROC_EOS_TEST_RECORDS",
})

log = logging.getLogger("streamproc.config")

ERROR_POLICIES = ("fail", "skip", "dead-letter")
GUARANTEES = ("at_least_once", "exactly_once_v2")


class ConfigError(StreamprocError, ValueError):
    """A setting is missing or has a bad value; the message names the setting, value and source."""


class _Bad(ValueError):
    """Raised by parsers; turned into a ConfigError naming the setting and the source."""


# ---------------------------------------------------------------------------------------------
# Parsers: accept the native type or a string (from a flag, env var or properties file).


def _parse_str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{value!r} is not a string")
    return value.strip()


def _parse_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Bad(f"{value!r} is not an integer")
    if isinstance(value, timedelta):  # durations (docs/semantics.md, "Time and stream time"): int ms or timedelta
        return (value.days * 86_400_000) + (value.seconds * 1000) + (value.microseconds // 1000)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip().replace("_", ""))
        except ValueError:
            raise _Bad(f"{value!r} is not an integer") from None
    raise _Bad(f"{value!r} is not an integer")


def _positive_int(value: Any) -> int:
    n = _parse_int(value)
    if n <= 0:
        raise _Bad(f"{n!r} must be a positive integer")
    return n


def _non_negative_int(value: Any) -> int:
    n = _parse_int(value)
    if n < 0:
        raise _Bad(f"{n!r} must not be negative")
    return n


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        low = value.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
    raise _Bad(f"{value!r} is not a boolean (use true/false)")


def _choice(*choices: str) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = _parse_str(value)
        norm = text.lower().replace("_", "-") if "dead" in text.lower() else text.lower()
        for c in choices:
            if norm == c:
                return c
        raise _Bad(f"{text!r} is not one of {', '.join(choices)}")

    return parse


def _port(value: Any) -> int:
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "none", "off")):
        return 0
    n = _parse_int(value)
    if not 0 <= n <= 65535:
        raise _Bad(f"{n!r} is not a TCP port (0-65535; 0 disables)")
    return n


def _host_port(value: Any) -> str:
    """``host:port`` (or empty)."""
    text = _parse_str(value)
    if not text:
        return ""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) <= 65535:
        raise _Bad(f"{text!r} is not host:port (e.g. 10.0.0.5:8080)")
    return text


_INSTANCE_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def _instance_id(value: Any) -> str:
    text = _parse_str(value)
    if text and not _INSTANCE_ID.match(text):
        raise _Bad(f"{text!r} may hold only letters, digits, '.', '_' and '-' (at most 200)")
    return text


_APP_ID = re.compile(r"^[A-Za-z0-9._-]{1,200}$")


def _application_id(value: Any) -> str:
    text = _parse_str(value)
    if not _APP_ID.match(text):
        raise _Bad(f"{text!r} is not a valid application id (letters, digits, '.', '_', '-'; 1-200 chars)")
    return text


def _override_value(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return text.strip()


def _client_params(client: str) -> dict[str, Any]:
    """The aiokafka ``client`` (producer or consumer) arguments with their defaults."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    cls = AIOKafkaProducer if client == "producer" else AIOKafkaConsumer
    return {name: p.default for name, p in inspect.signature(cls.__init__).parameters.items()
            if name not in ("self", "loop", "topics")}


#: Client arguments with a fixed set of values (``None`` allowed where aiokafka's default is None).
_CLIENT_CHOICES: dict[str, tuple[Any, ...]] = {
    "acks": (0, 1, -1, "all"),
    "compression_type": (None, "gzip", "snappy", "lz4", "zstd"),
    "isolation_level": ("read_uncommitted", "read_committed"),
    "security_protocol": ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
    "sasl_mechanism": ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
}
#: Client arguments that are numbers although aiokafka's default is None.
_CLIENT_OPTIONAL_INTS = {"rebalance_timeout_ms", "max_poll_records"}
#: Client arguments that are Python objects although aiokafka's default is None.
_CLIENT_OBJECTS = {"ssl_context", "sasl_oauth_token_provider"}


def _check_client_value(key: str, value: Any, default: Any) -> None:
    """A ``_Bad`` naming what ``value`` of client argument ``key`` must be, judged by aiokafka's
    default for it (a bool, an int, a str, one of a few choices); arguments that are objects (an
    SSL context, a partitioner...) cannot come from a setting."""
    if key in _CLIENT_OBJECTS:
        raise _Bad("is a Python object in aiokafka: it cannot be set from a setting")
    if key in _CLIENT_CHOICES:
        if value not in _CLIENT_CHOICES[key]:
            raise _Bad(f"must be one of {', '.join(repr(c) for c in _CLIENT_CHOICES[key])}")
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise _Bad("must be true or false")
    elif isinstance(default, int) or key in _CLIENT_OPTIONAL_INTS:
        if value is None and default is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise _Bad("must be a non-negative integer")
    elif isinstance(default, str):
        if not isinstance(value, str):
            raise _Bad("must be text")
    elif default is not None:
        raise _Bad(f"is a {type(default).__name__} object in aiokafka: it cannot be set from a setting")


#: Overrides the daemon must own (it sets them from other settings or relies on them).
_RESERVED = {
    "producer": {"bootstrap_servers", "key_serializer", "value_serializer", "transactional_id"},
    "consumer": {"bootstrap_servers", "group_id", "enable_auto_commit", "key_deserializer",
                 "value_deserializer", "auto_offset_reset"},
}


def _overrides(client: str) -> Callable[[Any], dict[str, Any]]:
    def parse(value: Any) -> dict[str, Any]:
        items: list[tuple[str, Any]]
        if isinstance(value, Mapping):
            items = list(value.items())
        elif isinstance(value, str):
            items = []
            for part in (p for p in value.split(",") if p.strip()):
                items.append(_split_pair(part))
        elif isinstance(value, (list, tuple)):
            items = [_split_pair(p) if isinstance(p, str) else tuple(p) for p in value]  # type: ignore[misc]
        else:
            raise _Bad(f"{value!r} is not a map of {client} settings")
        known = _client_params(client)
        out: dict[str, Any] = {}
        for raw_key, raw_val in items:
            key = str(raw_key).strip().replace(".", "_").replace("-", "_")
            if key not in known:
                settable = sorted(k for k, default in known.items()
                                  if k not in _RESERVED[client] and k not in _CLIENT_OBJECTS
                                  and (default is None or isinstance(default, (bool, int, float, str))
                                       or k in _CLIENT_CHOICES))
                close = difflib.get_close_matches(key, settable, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise _Bad(f"unknown {client} setting {raw_key!r}; {hint}(aiokafka {client} arguments that can be "
                           f"set: {', '.join(settable)})")
            if key in _RESERVED[client]:
                raise _Bad(f"{client} setting {raw_key!r} is managed by streamproc and cannot be overridden")
            value = _override_value(raw_val) if isinstance(raw_val, str) else raw_val
            try:
                _check_client_value(key, value, known[key])
            except _Bad as exc:
                raise _Bad(f"{client} setting {raw_key}={raw_val!r} {exc}") from None
            out[key] = value
        return out

    return parse


def _topic_config(value: Any) -> dict[str, str]:
    """The ``topic_config`` map: see the module docstring and :mod:`streamproc.topic_config`."""
    items: list[tuple[Any, Any]]
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, str):
        items = []
        for part in (p.strip() for p in value.split(",") if p.strip()):
            if "=" not in part and items:  # a comma inside a value: cleanup.policy=compact,delete
                items[-1] = (items[-1][0], f"{items[-1][1]},{part}")
            else:
                items.append(_split_pair(part))
    elif isinstance(value, (list, tuple)):
        items = [_split_pair(p) if isinstance(p, str) else tuple(p) for p in value]  # type: ignore[misc]
    else:
        raise _Bad(f"{value!r} is not a map of Kafka topic configs")
    try:
        return normalize_topic_config(items)
    except ValueError as exc:
        raise _Bad(str(exc)) from None


def _split_pair(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise _Bad(f"{text!r} is not key=value")
    k, v = text.split("=", 1)
    return k.strip(), v.strip()


# ---------------------------------------------------------------------------------------------
# The table.


def _setting(default: Any, doc: str, parse: Callable[[Any], Any], *, choices: tuple[str, ...] = (),
             required: bool = False, metavar: str = "") -> Any:
    meta = {"doc": doc, "parse": parse, "choices": choices, "required": required, "metavar": metavar}
    if isinstance(default, dict):
        return field(default_factory=dict, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Config:
    """The daemon's settings (see the module docstring for sources and precedence).

    Construct directly (``Config(application_id="sessions")``; strings are parsed like flags) or
    with :meth:`load`. Every value is validated on construction.
    """

    application_id: str = _setting(
        None, "Consumer group id, prefix of internal topics (`<id>-<store>-changelog`, `<id>-dlq`).",
        _application_id, required=True, metavar="ID")
    bootstrap_servers: str = _setting(
        "localhost:9092", "Kafka bootstrap servers, comma separated host:port.", _parse_str, metavar="HOSTS")
    processing_guarantee: str = _setting(
        "at_least_once", "`at_least_once` (delayed acks) or `exactly_once_v2` (outputs, changelog records "
        "and input offsets commit in one Kafka transaction; consumers read committed data only; see "
        "docs/durability.md).", _choice(*GUARANTEES), choices=GUARANTEES)
    commit_interval_ms: int = _setting(
        1000, "How often offsets are committed (flush changelogs, wait for their acks, commit).",
        _positive_int, metavar="MS")
    delivery_timeout_ms: int = _setting(
        120_000, "A send not acknowledged within this time fails its task, which restarts from its "
                 "last committed offset.", _positive_int, metavar="MS")
    auto_offset_reset: str = _setting(
        "earliest", "Where a partition without a committed offset starts.", _choice("earliest", "latest"),
        choices=("earliest", "latest"))
    max_poll_records: int = _setting(
        5000, "Maximum records per getmany() batch.", _positive_int, metavar="N")
    poll_timeout_ms: int = _setting(
        100, "How long getmany() waits for records.", _positive_int, metavar="MS")
    max_task_idle_ms: int = _setting(
        30_000, "How long a task waits for an input partition that has nothing buffered but unread "
                "records on the broker before it processes its other inputs anyway (it processes its "
                "inputs in timestamp order across partitions; docs/semantics.md). Longer than a broker "
                "failover, so losing a partition leader does not reorder a task's input; 0 = never wait.",
        _non_negative_int, metavar="MS")
    buffered_records_per_partition: int = _setting(
        1000, "Fetched records a task buffers per input partition; a full partition's fetching is "
              "paused until the task has processed below this bound.", _positive_int, metavar="N")
    changelog_enabled: bool = _setting(
        True, "Change-log stores to `<application_id>-<store>-changelog` and restore them on assignment. "
              "Off: state starts empty on every assignment.", _parse_bool, metavar="BOOL")
    repartition_purge_interval_ms: int = _setting(
        30_000, "How often records of repartition topics below the committed offsets are deleted "
                "(repartition topics are created with `retention.ms=-1`); 0 = never.",
        _non_negative_int, metavar="MS")
    create_topics: bool = _setting(
        True, "Create missing output, repartition, changelog and dead-letter topics at startup.",
        _parse_bool, metavar="BOOL")
    replication_factor: int = _setting(
        -1, "Replication factor of topics the daemon creates; -1 = the cluster's `default.replication.factor` "
            "(read from the brokers). A topic is never created with fewer replicas: while fewer brokers are "
            "alive, the daemon waits (`topic_creation_timeout_ms`). Existing topics with fewer replicas get a "
            "WARNING.", _parse_int, metavar="N")
    topic_creation_timeout_ms: int = _setting(
        300_000, "How long the daemon waits at startup for enough brokers to create its topics with "
                 "`replication_factor` replicas; past it, it exits with status 1 naming the topics, the factor "
                 "and the brokers it sees.", _positive_int, metavar="MS")
    topic_config: dict = _setting(  # type: ignore[type-arg]  # noqa: RUF009
        {}, "Kafka topic configs for every topic the daemon creates (changelog, repartition, output, "
            "dead-letter), e.g. `min.insync.replicas=2` (`key=value`, repeatable). The configs the daemon "
            "needs (a changelog's `cleanup.policy` and retention, a repartition topic's `cleanup.policy` and "
            "`retention.ms`) cannot be changed; unknown keys are refused.", _topic_config, metavar="KEY=VALUE")
    state_dir: str = _setting(
        "", "Directory for local state: task snapshots written on clean shutdown (store contents + "
            "changelog offset, so a restart replays only the changelog's tail) and the instance id that "
            "names the transactional producer. Empty: no snapshots. One directory per running instance.",
        _parse_str, metavar="DIR")
    group_instance_id: str = _setting(
        "", "Static group membership (KIP-345): a name unique to this instance and kept across its restarts "
            "(e.g. the pod name). Restarted within the consumer's `session_timeout_ms`, the instance gets its "
            "tasks back and the other members do not rebalance. Empty: dynamic membership. See docs/production.md.",
        _instance_id, metavar="NAME")
    num_standby_replicas: int = _setting(
        0, "Standby copies of each stateful task, kept on other instances by tailing the changelogs; on "
           "fail-over the new owner restores only the tail.", _non_negative_int, metavar="N")
    suspended_task_retention_ms: int = _setting(
        300_000, "How long a task that a rebalance moved away keeps its state in memory: given back within "
                 "this time, it restores only the changelog records written since; 0 = drop at once.",
        _non_negative_int, metavar="MS")
    query_port: int = _setting(
        0, "Port of the interactive-query HTTP endpoint (`/v1/stores`, docs/queries.md); 0 disables it.",
        _port, metavar="PORT")
    query_host: str = _setting(
        "127.0.0.1", "Address the interactive-query endpoint listens on.", _parse_str, metavar="HOST")
    application_server: str = _setting(
        "", "host:port other instances redirect queries to (advertised to the group); empty = "
            "`query_host:query_port`.", _host_port, metavar="HOST:PORT")
    restore_log_interval_ms: int = _setting(
        2000, "How often restoration progress is logged per changelog partition (the first line after one "
              "interval).", _positive_int, metavar="MS")
    progress_log_interval_ms: int = _setting(
        30_000, "How often a progress line is logged at INFO while records flow: records/s in and out, lag, "
                "pending acks; 0 = never.", _non_negative_int, metavar="MS")
    deserialization_error_policy: str = _setting(
        "fail", "A record whose bytes do not deserialize: `fail` (stop the daemon), `skip` (log, count) "
                "or `dead-letter` (send the original bytes to the dead-letter topic).",
        _choice(*ERROR_POLICIES), choices=ERROR_POLICIES)
    processing_error_policy: str = _setting(
        "fail", "A record on which a user function raises: `fail`, `skip` or `dead-letter`.",
        _choice(*ERROR_POLICIES), choices=ERROR_POLICIES)
    dlq_topic: str = _setting(
        "", "Dead-letter topic; empty = `<application_id>-dlq`.", _parse_str, metavar="TOPIC")
    metrics_port: int = _setting(
        0, "Port of the Prometheus /metrics endpoint; 0 disables it.", _port, metavar="PORT")
    metrics_host: str = _setting(
        "127.0.0.1", "Address the metrics endpoint listens on.", _parse_str, metavar="HOST")
    shutdown_timeout_ms: int = _setting(
        30_000, "Deadline for a graceful stop (finish the batch, commit, close).", _positive_int, metavar="MS")
    gc_threshold: int = _setting(
        20_000, "While the daemon runs, Python's cyclic garbage collector starts a young-generation "
                "collection after this many allocations (the interpreter's default, 700, costs about a "
                "tenth of the daemon's CPU at high record rates); 0 = leave the interpreter's setting.",
        _non_negative_int, metavar="N")
    loop: str = _setting(
        "uvloop", "Event loop: `uvloop` or `asyncio`.", _choice("uvloop", "asyncio"), choices=("uvloop", "asyncio"))
    log_level: str = _setting(
        "INFO", "Log level.", lambda v: _choice("debug", "info", "warning", "error")(v).upper(),
        choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    producer_config: dict = _setting(  # type: ignore[type-arg]
        {}, "Extra aiokafka producer arguments (`key=value`, repeatable).", _overrides("producer"),
        metavar="KEY=VALUE")
    consumer_config: dict = _setting(  # type: ignore[type-arg]
        {}, "Extra aiokafka consumer arguments (`key=value`, repeatable).", _overrides("consumer"),
        metavar="KEY=VALUE")

    def __post_init__(self) -> None:
        for info in settings():
            value = getattr(self, info.name)
            if value is None and info.required:
                raise ConfigError(
                    f"{info.name} is required: pass {info.flag}, set {info.env} or put "
                    f"{info.name} in the config file")
            try:
                parsed = info.parse(value)
            except _Bad as exc:
                raise ConfigError(f"{info.name}: {exc}") from None
            object.__setattr__(self, info.name, parsed)
        if self.processing_guarantee == "exactly_once_v2":
            acks = self.producer_config.get("acks")
            if acks not in (None, "all", -1) or self.producer_config.get("enable_idempotence") is False:
                raise ConfigError(
                    f"producer_config: acks={acks!r}, enable_idempotence="
                    f"{self.producer_config.get('enable_idempotence')!r} cannot be used with "
                    f"processing_guarantee=exactly_once_v2 (transactions need acks=all and idempotence)")
        if self.replication_factor == 0 or self.replication_factor < -1:
            raise ConfigError(f"replication_factor: {self.replication_factor!r} must be -1 or a positive integer")

    # -----------------------------------------------------------------------------------------

    @property
    def advertised_server(self) -> str:
        """Where other instances send queries for this instance's partitions: ``application_server``,
        else ``query_host:query_port`` when queries are on, else empty."""
        if self.application_server:
            return self.application_server
        return f"{self.query_host}:{self.query_port}" if self.query_port else ""

    @property
    def dead_letter_topic(self) -> str:
        """The dead-letter topic: ``dlq_topic`` or ``<application_id>-dlq``."""
        return self.dlq_topic or f"{self.application_id}-dlq"

    def replace(self, **changes: Any) -> Config:
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def load(cls, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
             file: str | os.PathLike[str] | None = None,
             defaults: Mapping[str, Any] | None = None) -> Config:
        """Merge the sources (flag > env > file > ``defaults`` > built-in default) and validate.

        ``flags`` maps setting names to values (what the CLI parsed; absent = not given). ``env``
        defaults to ``os.environ``. ``file`` (or ``$STREAMPROC_CONFIG``) is a ``.toml`` file or a
        ``.properties`` / ``key=value`` file. ``defaults`` replace built-in defaults (the CLI passes
        the topology's own ``application_id`` this way).
        """
        env = os.environ if env is None else env
        by_name = {s.name: s for s in settings()}
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for name, value in (defaults or {}).items():
            if name not in by_name:
                raise ConfigError(f"unknown setting {name!r}; settings are {', '.join(sorted(by_name))}")
            if value is not None:
                values[name], sources[name] = value, "default"
        path = file if file is not None else env.get(CONFIG_FILE_ENV) or None
        if path is not None:
            for name, value in _read_file(Path(path), by_name).items():
                values[name], sources[name] = value, f"config file {path}"
        for info in by_name.values():
            if info.env in env:
                values[info.name], sources[info.name] = env[info.env], f"env {info.env}"
        for name, value in (flags or {}).items():
            if name not in by_name:
                raise ConfigError(f"unknown setting {name!r}; settings are {', '.join(sorted(by_name))}")
            if value is None:
                continue
            values[name], sources[name] = value, f"flag {by_name[name].flag}"
        _warn_unknown_env(env, {info.env for info in by_name.values()})
        # parse each value here so errors name the source
        parsed: dict[str, Any] = {}
        for name, value in values.items():
            try:
                parsed[name] = by_name[name].parse(value)
            except _Bad as exc:
                raise ConfigError(f"{name} (from {sources[name]}): {exc}") from None
        return cls(**parsed)

    def describe(self) -> Iterator[tuple[str, Any]]:
        """``(name, value)`` pairs, for logging the effective configuration."""
        for info in settings():
            yield info.name, getattr(self, info.name)


@dataclass(frozen=True)
class SettingInfo:
    """One row of the settings table (derived from the :class:`Config` fields)."""

    name: str
    default: Any
    doc: str
    parse: Callable[[Any], Any]
    choices: tuple[str, ...]
    required: bool
    metavar: str

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.name.upper()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def is_map(self) -> bool:
        return self.name.endswith("_config")


def settings() -> tuple[SettingInfo, ...]:
    """The settings table, in declaration order."""
    return _SETTINGS


def _build_table() -> tuple[SettingInfo, ...]:
    rows = []
    for f in dataclasses.fields(Config):
        default = {} if f.default_factory is not dataclasses.MISSING else f.default  # type: ignore[misc]
        m = f.metadata
        rows.append(SettingInfo(f.name, default, m["doc"], m["parse"], m["choices"], m["required"], m["metavar"]))
    return tuple(rows)


_SETTINGS = _build_table()


def _read_file(path: Path, by_name: Mapping[str, SettingInfo]) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    if path.suffix == ".toml":
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid TOML: {exc}") from None
        out: dict[str, Any] = {}
        for key, value in data.items():
            name = key.replace("-", "_").replace(".", "_")
            if name in ("producer", "consumer", "topic"):
                name += "_config"
            if name not in by_name:
                raise ConfigError(f"config file {str(path)!r}: unknown setting {key!r}")
            out[name] = value
        return out
    out = {}
    producer: dict[str, str] = {}
    consumer: dict[str, str] = {}
    topic: dict[str, str] = {}
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        sep = min((i for i in (text.find("="), text.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"config file {str(path)!r} line {lineno}: {text!r} is not key=value")
        key, value = text[:sep].strip(), text[sep + 1:].strip()
        if key.startswith("producer."):
            producer[key[len("producer."):]] = value
            continue
        if key.startswith("consumer."):
            consumer[key[len("consumer."):]] = value
            continue
        name = key.replace("-", "_").replace(".", "_")
        if name not in by_name and key.startswith("topic."):  # topic.min.insync.replicas (not topic.creation...)
            topic[key[len("topic."):]] = value
            continue
        if name not in by_name:
            raise ConfigError(f"config file {str(path)!r} line {lineno}: unknown setting {key!r}")
        out[name] = value
    if producer:
        out["producer_config"] = producer
    if consumer:
        out["consumer_config"] = consumer
    if topic:
        out["topic_config"] = topic
    return out


def _warn_unknown_env(env: Mapping[str, str], setting_vars: set[str]) -> list[str]:
    """One WARNING per ``STREAMPROC_*`` variable of ``env`` that names no setting (and is not one of
    :data:`OTHER_ENV`), with the closest setting's variable; returns the warnings."""
    out = []
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in setting_vars or name in OTHER_ENV or name == CONFIG_FILE_ENV:
            continue
        suffixes = {var[len(ENV_PREFIX):]: var for var in setting_vars}
        close = difflib.get_close_matches(name[len(ENV_PREFIX):], sorted(suffixes), n=1, cutoff=0.6)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else "; `streamproc run --help` lists the settings"
        out.append(f"environment variable {name} names no streamproc setting and is ignored{hint}")
        log.warning("%s", out[-1])
    return out
