"""Sources and sinks: the edges of a task's processor graph.

A source deserialises a record's raw key and value with its topic's serdes (bytes and objects pass
through untouched when there is no serde) and forwards ``(key, value, timestamp)``. A sink
serialises with its serdes (when given) and appends an :class:`OutputRecord` to the task's output
buffer, carrying the headers of the record being processed.
"""

from __future__ import annotations

from typing import Any

from ..errors import SerializationError
from ..serde import Serde
from .base import Processor
from .context import OutputRecord

__all__ = ["SinkProcessor", "SourceProcessor", "internal_topic_name"]

_output = tuple.__new__  # OutputRecord(...) without the NamedTuple __new__ wrapper (hot path)


def internal_topic_name(application_id: str, name: str) -> str:
    """Full name of an internal topic: ``<application_id>-<name>``."""
    return f"{application_id}-{name}"


class SourceProcessor(Processor):
    """Reads ``topics`` (internal ones are resolved with the application id at ``init``)."""

    __slots__ = ("_kd", "_vd", "_where", "internal", "key_serde", "topics", "value_serde")

    def __init__(self, name: str, topics: tuple[str, ...], key_serde: Serde | None,
                 value_serde: Serde | None, internal: bool = False) -> None:
        super().__init__(name)
        self.topics = topics
        self.internal = internal
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._kd = key_serde.deserialize if key_serde is not None else None
        self._vd = value_serde.deserialize if value_serde is not None else None
        self._where = f"source {name!r}"

    def resolved_topics(self, application_id: str) -> tuple[str, ...]:
        if self.internal:
            return tuple(internal_topic_name(application_id, t) for t in self.topics)
        return self.topics

    def receive(self, record: Any) -> None:
        """Deserialise ``record`` (an object with ``.key .value .timestamp``) and forward it."""
        key = record.key
        value = record.value
        kd = self._kd
        vd = self._vd
        if kd is not None or vd is not None:
            try:
                if kd is not None:
                    key = kd(key, self._where)
                if vd is not None:
                    value = vd(value, self._where)
            except SerializationError as exc:
                topic = getattr(record, "topic", None)
                partition = getattr(record, "partition", None)
                offset = getattr(record, "offset", None)
                raise SerializationError(f"{exc} (record at {topic}[{partition}]@{offset})",
                                         reason=exc.reason) from exc
        self.forward(key, value, record.timestamp)


class SinkProcessor(Processor):
    """Writes to ``topic``; ``internal`` topics (repartition) are ``<application_id>-<topic>``.

    With ``drop_null_keys`` (repartition before an aggregation or inner join) records with a ``None``
    key are dropped (they cannot be grouped), counting them in ``dropped_records_null_key``.
    """

    __slots__ = (
        "_append",
        "_ks",
        "_resolved",
        "_vs",
        "_where",
        "drop_null_keys",
        "dropped_null_key",
        "internal",
        "key_serde",
        "topic",
        "value_serde",
    )

    def __init__(self, name: str, topic: str, key_serde: Serde | None, value_serde: Serde | None,
                 internal: bool = False, drop_null_keys: bool = False) -> None:
        super().__init__(name)
        self.topic = topic
        self.internal = internal
        self.drop_null_keys = drop_null_keys
        self.key_serde = key_serde
        self.value_serde = value_serde
        self._resolved = topic
        self._append: Any = None
        self._ks = key_serde.serialize if key_serde is not None else None
        self._vs = value_serde.serialize if value_serde is not None else None
        self._where = f"sink {name!r} (topic {topic!r})"
        self.dropped_null_key = 0

    def resolved_topic(self, application_id: str) -> str:
        return internal_topic_name(application_id, self.topic) if self.internal else self.topic

    def init(self, task: Any) -> None:
        super().init(task)
        self._resolved = self.resolved_topic(task.application_id)
        self._append = task.outputs.append

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        if key is None and self.drop_null_keys:
            self.dropped_null_key += 1
            self.log_once("null-key", "dropping records with a None key before repartitioning")
            return
        if self._ks is not None:
            key = self._ks(key, self._where)
        if self._vs is not None:
            value = self._vs(value, self._where)
        self._append(_output(OutputRecord, (self._resolved, key, value, timestamp, self.task.current.headers)))  # type: ignore[union-attr]

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_null_key": self.dropped_null_key} if self.drop_null_keys else {}
