"""StreamsBuilder: the entry point of the DSL.

>>> from streamproc import serde
>>> b = StreamsBuilder()
>>> clicks = b.stream("clicks", key_serde=serde.STRING, value_serde=serde.JSON)
>>> clicks.filter(lambda k, v: v["page"] != "/health").to("clean-clicks")
>>> topology = b.build()

Naming: every operator gets a unique name, the one given (``name=``) or ``PREFIX-<10-digit
index>`` from its position (``KSTREAM-FILTER-0000000001``), so the same code always yields the same
names. A stateful operator's store (and changelog ``<application_id>-<name>-changelog``) carries
its name. A name used twice is a ``ValueError`` at the call that reuses it.

Serdes: sources and sinks use the serdes given to them (none: objects pass through in the test
driver, raw bytes in the daemon). Repartition topics and store changelogs need serdes; each one
uses, in order: the serde given to the operator (``key_serde=``, ``value_serde=``, ``Materialized``,
``Grouped``), the serde known for the data at that point (a source's serde travels through
operators that do not change the key or the value), else the builder's ``default_serde``
(:data:`~streamproc.processors.serdes.JSON_OR_BYTES`: JSON, and raw bytes as bytes; JSON arrays
in keys come back as tuples).
``StreamsBuilder(default_serde=None)`` makes them mandatory: a missing one is a ``ValueError``
naming the store or topic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..processors.serdes import JSON_OR_BYTES, JSON_OR_BYTES_KEY
from ..processors.table import TableSourceProcessor
from ..serde import Serde
from ..time import Duration, duration_ms
from .graph import KeyValueStoreBuilder, StoreSpec
from .graph_builder import Flow, GraphBuilder
from .options import Consumed, Materialized, check_serde
from .streams import KStream, KTable
from .table_graph import TableFlow, TableState
from .topology import Topology

__all__ = ["StreamsBuilder"]

_UNSET: Any = object()


class StreamsBuilder:
    """Records a topology: ``stream()``/``table()`` create sources, operators chain on them,
    ``build()`` returns the :class:`Topology`."""

    def __init__(self, default_serde: Serde | None = _UNSET, application_id: str | None = None) -> None:
        if default_serde is _UNSET:
            self.default_key_serde: Serde | None = JSON_OR_BYTES_KEY
            self.default_serde: Serde | None = JSON_OR_BYTES
        else:
            self.default_serde = check_serde(default_serde, "default_serde", "StreamsBuilder")
            self.default_key_serde = self.default_serde
        self.application_id = application_id
        self._graph = GraphBuilder(self.default_key_serde, self.default_serde)

    # -- sources --------------------------------------------------------------------------------------
    def stream(self, topics: str | Iterable[str], key_serde: Any = None, value_serde: Any = None,
               name: str | None = None, consumed: Consumed | None = None) -> KStream:
        """A stream of the records of ``topics`` (a topic name or several).

        ``key_serde``/``value_serde`` deserialise the topic's bytes (absent: records pass through as
        they come, which in the test driver means Python objects).
        """
        consumed = consumed or Consumed()
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list:
            raise ValueError("stream() needs at least one topic")
        ks = check_serde(key_serde if key_serde is not None else consumed.key_serde, "key_serde", "stream()")
        vs = check_serde(value_serde if value_serde is not None else consumed.value_serde, "value_serde", "stream()")
        g = self._graph
        node_name = g.new_name(name or consumed.name, "KSTREAM-SOURCE", "stream source")
        registered = tuple(g.register_source_topic(t, node_name) for t in topic_list)
        return KStream(g, Flow(g.add_source(node_name, registered, ks, vs), ks, vs, False))

    def table(self, topic: str, name: str | None = None, versioned: Duration | None = None,
              key_serde: Any = None, value_serde: Any = None, materialized: Any = None) -> KTable:
        """A table materialised from ``topic`` (latest value per key; ``None`` values delete).

        ``versioned=history_retention`` (int ms or timedelta) makes it a versioned table (KIP-889): its
        store keeps the versions of the last ``history_retention`` of stream time, and stream joins
        look values up as of each record's timestamp. ``name`` names the store (default
        ``<topic>-STATE-STORE-<index>``) and its changelog.
        """
        mat = materialized or Materialized()
        ks = check_serde(key_serde if key_serde is not None else mat.key_serde, "key_serde", f"table({topic!r})")
        vs = check_serde(value_serde if value_serde is not None else mat.value_serde, "value_serde",
                         f"table({topic!r})")
        history: int | None = None
        if versioned is not None:
            history = duration_ms(versioned, "versioned (history retention)", f"table {topic!r}")
        g = self._graph
        source_name = g.new_name(None, "KSTREAM-SOURCE", "table source")
        registered = (g.register_source_topic(topic, source_name),)
        store_name = g.new_name(name or mat.name, f"{topic}-STATE-STORE", f"table {topic!r}")
        source = g.add_source(source_name, registered, ks, vs)
        kind = "versioned" if history is not None else "key_value"
        g.add_store(StoreSpec(name=store_name, kind=kind, owner=store_name,
                              key_serde=g.serde(f"key of table store {store_name!r}", ks),
                              value_serde=g.serde(f"value of table store {store_name!r}", vs),
                              history_retention_ms=history, logging=mat.logging))
        is_versioned = history is not None
        state = TableState()
        node = g.add_node(store_name, "processor", "versioned-table" if is_versioned else "table",
                          lambda: TableSourceProcessor(store_name, store_name, is_versioned,
                                                       state.timestamped_store, state.send_old_values),
                          parents=[source], stores=(store_name,))
        named = (name or mat.name) is not None and store_name != topic
        label = f"table {store_name!r} (topic {topic!r})" if named else f"table {topic!r}"
        return KTable(g, TableFlow(node, store_name=store_name, key_serde=ks, value_serde=vs,
                                   history_retention_ms=history, state=state, label=label))

    # -- Processor API ---------------------------------------------------------------------------------
    def add_state_store(self, store_builder: KeyValueStoreBuilder) -> StreamsBuilder:
        """Add a user key-value store (change-logged to ``<application_id>-<name>-changelog`` unless
        ``logging=False``, restored like the DSL's stores); processors list it in
        ``KStream.process(..., stores=[name])``."""
        if not isinstance(store_builder, KeyValueStoreBuilder):
            raise ValueError(f"add_state_store() needs a KeyValueStoreBuilder(name, key_serde, value_serde), "  # noqa: TRY004 - bad input is a ValueError
                             f"got {store_builder!r}")
        g = self._graph
        name = g.new_name(store_builder.name, "", "state store")
        g.add_store(StoreSpec(
            name=name, kind="key_value", owner=name,
            key_serde=g.serde(f"key of state store {name!r}", check_serde(store_builder.key_serde, "key_serde",
                                                                           f"state store {name!r}")),
            value_serde=g.serde(f"value of state store {name!r}",
                                check_serde(store_builder.value_serde, "value_serde", f"state store {name!r}")),
            logging=bool(store_builder.logging)))
        return self

    # -- result ---------------------------------------------------------------------------------------
    def build(self, application_id: str | None = None) -> Topology:
        """The :class:`Topology` recorded so far (``application_id`` names internal topics in
        ``describe()`` and ``subtopologies``; tasks and the test driver use their own)."""
        return self._graph.build(application_id or self.application_id)
