"""Kafka topic config names: the one list streamproc validates ``topic_config`` against.

``topic_config`` (``--topic-config KEY=VALUE``, ``STREAMPROC_TOPIC_CONFIG``, ``[topic_config]``)
holds Kafka *topic* configs applied to every topic the daemon creates. A key that is not a topic
config of Kafka 4.x is refused before the daemon starts (a typo such as ``min.isr`` would otherwise
reach the broker only when a topic is created, or never, when every topic already exists).

:data:`TOPIC_CONFIG_NAMES` is the list of Kafka 4.3's topic configs (``TopicConfig`` /
``LogConfig``); ``tests/integration/test_topic_settings.py`` checks it against what a running broker
describes for a topic, so a Kafka upgrade that adds or removes one fails a test instead of
silently refusing a valid key.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["TOPIC_CONFIG_NAMES", "normalize_topic_config"]

#: Every topic-level config of Kafka 4.3 (what ``kafka-configs.sh --entity-type topics`` accepts).
TOPIC_CONFIG_NAMES: frozenset[str] = frozenset({
    "cleanup.policy",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.log.copy.disable",
    "remote.log.delete.on.disable",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
})


def _flatten(items: Iterable[tuple[Any, Any]], prefix: str = "") -> Iterable[tuple[str, Any]]:
    """TOML reads ``min.insync.replicas = 2`` as nested tables: join their keys with dots."""
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            yield from _flatten(value.items(), name + ".")
        else:
            yield name, value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):  # TOML: cleanup.policy = ["compact", "delete"]
        return ",".join(_text(v) for v in value)
    return str(value).strip()


def normalize_topic_config(items: Iterable[tuple[Any, Any]]) -> dict[str, str]:
    """``(key, value)`` pairs -> ``{kafka name: string value}``.

    Keys take Kafka's dotted spelling or underscores (``min_insync_replicas``: no Kafka topic config
    has an underscore); nested mappings (TOML dotted keys) are joined with dots; values become the
    strings Kafka expects (``True`` -> ``"true"``, a list -> comma separated). Raises
    :class:`ValueError` naming an unknown key (with the closest known names) or an empty value.
    """
    out: dict[str, str] = {}
    for raw_key, raw_value in _flatten(items):
        key = str(raw_key).strip().lower().replace("_", ".").replace("-", ".")
        if key not in TOPIC_CONFIG_NAMES:
            close = difflib.get_close_matches(key, sorted(TOPIC_CONFIG_NAMES), n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
            raise ValueError(f"unknown Kafka topic config {raw_key!r}; {hint}the topic configs are: "
                             f"{', '.join(sorted(TOPIC_CONFIG_NAMES))}")
        value = _text(raw_value)
        if not value:
            raise ValueError(f"topic config {raw_key!r} has an empty value")
        out[key] = value
    return out
