"""Non-windowed stream aggregation (``group_by_key().count()/reduce()/aggregate()``) on a
change-logged key-value store: docs/semantics.md, "Tables and their aggregations".

For each record ``(key, value, ts)``, as Kafka Streams' ``KStreamAggregate``/``KStreamReduce``:

1. ``key is None``: dropped (``dropped_records_null_key``); ``value is None``: dropped
   (``dropped_records_null_value``); this holds for ``count`` too (Kafka Streams counts through the
   same aggregate processor, which skips null values).
2. ``old = store.get(key)``; ``agg = aggregator(key, value, old.value)`` or, for a new key,
   ``aggregator(key, value, initializer())``; timestamp ``max(ts, old.timestamp)`` (``ts`` for a new key).
3. The store holds :class:`~streamproc.processors.window_aggregate.ValueAndTimestamp` ``(agg, timestamp)``
   (an aggregate of None deletes the key); ``(key, agg, timestamp)`` is forwarded.

The user functions run before the store changes, so one that raises (reported as
:class:`~streamproc.errors.ProcessingError`) leaves the state as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Processor, kv_writer, user_error
from .window_aggregate import ValueAndTimestamp

__all__ = ["KeyValueAggregateProcessor"]


class KeyValueAggregateProcessor(Processor):
    """The non-windowed aggregate operator; its key-value store is named ``store_name``."""

    __slots__ = ("_delete", "_put", "aggregator", "dropped_null_key", "dropped_null_value", "initializer",
                 "old_value", "store", "store_name")

    def __init__(self, name: str, store_name: str, initializer: Callable[[], Any],
                 aggregator: Callable[[Any, Any, Any], Any]) -> None:
        super().__init__(name)
        self.store_name = store_name
        self.initializer = initializer
        self.aggregator = aggregator
        self.store: Any = None
        self._put: Any = None
        self._delete: Any = None
        self.dropped_null_key = 0
        self.dropped_null_value = 0
        #: the key's aggregate before the update being forwarded (table operators downstream read it)
        self.old_value: Any = None

    def init(self, task: Any) -> None:
        super().init(task)
        self.store = task.stores[self.store_name]
        self._put, self._delete = kv_writer(self.store)

    def process(self, key: Any, value: Any, ts: int) -> None:
        if key is None:
            self.dropped_null_key += 1
            self.log_once("null-key", "dropping records with a None key (aggregation needs a key)")
            return
        if value is None:
            self.dropped_null_value += 1
            self.log_once("null-value", "dropping records with a None value (Kafka Streams' aggregations skip them)")
            return
        old = self.store.get(key)
        try:
            if old is None:
                self.old_value = None
                agg = self.aggregator(key, value, self.initializer())
            else:
                self.old_value = old.value
                agg = self.aggregator(key, value, old.value)
                ts = max(ts, old.timestamp)
        except Exception as exc:
            raise user_error(self.name, "aggregation function", exc, key) from exc
        if agg is None:
            self._delete(key, ts)
        else:
            self._put(key, ValueAndTimestamp(agg, ts), ts)
        self.forward(key, agg, ts)

    def metrics(self) -> dict[str, int]:
        return {"dropped_records_null_key": self.dropped_null_key,
                "dropped_records_null_value": self.dropped_null_value}
