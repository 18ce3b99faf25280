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

from collections.abc import Callable, Iterable
from typing import Any

from ..processors.io import SourceProcessor
from ..processors.serdes import JSON_OR_BYTES, JSON_OR_BYTES_KEY
from ..processors.table import TableSourceProcessor
from ..serde import Serde
from ..time import Duration, duration_ms
from .graph import KeyValueStoreBuilder, Node, StoreSpec
from .options import Consumed, check_name, check_serde
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
        self._nodes: list[Node] = []
        self._stores: dict[str, StoreSpec] = {}
        self._names: dict[str, Node] = {}
        self._reserved: set[str] = set()
        self._source_topics: dict[str, str] = {}
        self._index = 0

    # -- naming and registration (used by the DSL classes) ------------------------------------------
    def _new_name(self, given: str | None, prefix: str, what: str) -> str:
        index = self._index
        self._index += 1
        if given is None:
            name = f"{prefix}-{index:010d}"
        else:
            name = check_name(given, what) or ""
        if name in self._reserved or name in self._stores:
            holder = self._names.get(name)
            desc = f"operator {holder.name!r} ({holder.op})" if holder is not None else "another operator or store"
            raise ValueError(
                f"name {name!r} of {what} is already used by {desc} of this topology; "
                f"every operator needs a unique name (it names its store and changelog topic)"
            )
        self._reserved.add(name)
        return name

    def _add_node(self, name: str, kind: str, op: str, make: Callable[[], Any], parents: Iterable[Node] = (),
                  stores: tuple[str, ...] = (), topics: tuple[str, ...] = (), internal: bool = False,
                  key_serde: Serde | None = None, value_serde: Serde | None = None) -> Node:
        node = Node(index=len(self._nodes), name=name, kind=kind, op=op, make=make, stores=stores,
                    topics=topics, internal=internal, key_serde=key_serde, value_serde=value_serde)
        for parent in parents:
            node.parents.append(parent)
            parent.children.append(node)
        self._nodes.append(node)
        self._names[name] = node
        return node

    def _add_store(self, spec: StoreSpec) -> None:
        if spec.name in self._stores or (spec.name in self._reserved and spec.name != spec.owner):
            raise ValueError(
                f"store name {spec.name!r} (of operator {spec.owner!r}) is already used in this topology; "
                f"give the operator another name"
            )
        self._stores[spec.name] = spec

    def _serde(self, what: str, *candidates: Serde | None) -> Serde:
        """The first serde among ``candidates`` and the default; ValueError when there is none."""
        for candidate in candidates:
            if candidate is not None:
                return candidate
        default = self.default_key_serde if what.startswith("key") else self.default_serde
        if default is None:
            raise ValueError(
                f"{what} needs a serde and none is known: pass key_serde=/value_serde= (or a "
                f"Materialized/Grouped) to the operator, give the source topic serdes, or build with "
                f"StreamsBuilder(default_serde=...)"
            )
        return default

    def _register_topic(self, topic: Any, node_name: str) -> str:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic names must be non-empty str, got {topic!r}")
        if topic in self._source_topics:
            raise ValueError(
                f"topic {topic!r} is already a source of this topology (node {self._source_topics[topic]!r}); "
                f"read it once and reuse the KStream/KTable"
            )
        self._source_topics[topic] = node_name
        return topic

    # -- sources --------------------------------------------------------------------------------------
    def stream(self, topics: str | Iterable[str], key_serde: Any = None, value_serde: Any = None,
               name: str | None = None, consumed: Consumed | None = None) -> KStream:
        """A stream of the records of ``topics`` (a topic name or several).

        ``key_serde``/``value_serde`` deserialise the topic's bytes (absent: records pass through as
        they come, which in the test driver means Python objects).
        """
        from .kstream import KStream

        consumed = consumed or Consumed()
        topic_list = [topics] if isinstance(topics, str) else list(topics)
        if not topic_list:
            raise ValueError("stream() needs at least one topic")
        ks = check_serde(key_serde if key_serde is not None else consumed.key_serde, "key_serde", "stream()")
        vs = check_serde(value_serde if value_serde is not None else consumed.value_serde, "value_serde", "stream()")
        node_name = self._new_name(name or consumed.name, "KSTREAM-SOURCE", "stream source")
        registered = tuple(self._register_topic(t, node_name) for t in topic_list)
        node = self._add_node(node_name, "source", "source",
                              lambda: SourceProcessor(node_name, registered, ks, vs),
                              topics=registered, key_serde=ks, value_serde=vs)
        return KStream(self, node, ks, vs)

    def table(self, topic: str, name: str | None = None, versioned: Duration | None = None,
              key_serde: Any = None, value_serde: Any = None, materialized: Any = None) -> KTable:
        """A table materialised from ``topic`` (latest value per key; ``None`` values delete).

        ``versioned=history_retention`` (int ms or timedelta) makes it a versioned table (KIP-889): its
        store keeps the versions of the last ``history_retention`` of stream time, and stream joins
        look values up as of each record's timestamp. ``name`` names the store (default
        ``<topic>-STATE-STORE-<index>``) and its changelog.
        """
        from .ktable import KTable, TableState
        from .options import Materialized

        mat = materialized or Materialized()
        ks = check_serde(key_serde if key_serde is not None else mat.key_serde, "key_serde", f"table({topic!r})")
        vs = check_serde(value_serde if value_serde is not None else mat.value_serde, "value_serde",
                         f"table({topic!r})")
        history: int | None = None
        if versioned is not None:
            history = duration_ms(versioned, "versioned (history retention)", f"table {topic!r}")
        source_name = self._new_name(None, "KSTREAM-SOURCE", "table source")
        registered = (self._register_topic(topic, source_name),)
        store_name = self._new_name(name or mat.name, f"{topic}-STATE-STORE", f"table {topic!r}")
        source = self._add_node(source_name, "source", "source",
                                lambda: SourceProcessor(source_name, registered, ks, vs),
                                topics=registered, key_serde=ks, value_serde=vs)
        kind = "versioned" if history is not None else "key_value"
        spec = StoreSpec(name=store_name, kind=kind, owner=store_name,
                         key_serde=self._serde(f"key of table store {store_name!r}", ks),
                         value_serde=self._serde(f"value of table store {store_name!r}", vs),
                         history_retention_ms=history, logging=mat.logging)
        self._add_store(spec)
        is_versioned = history is not None
        state = TableState()
        node = self._add_node(store_name, "processor", "versioned-table" if is_versioned else "table",
                              lambda: TableSourceProcessor(store_name, store_name, is_versioned,
                                                           state.timestamped_store, state.send_old_values),
                              parents=[source], stores=(store_name,))
        return KTable(self, node, store_name=store_name, key_serde=ks, value_serde=vs,
                      history_retention_ms=history, windowed=False, state=state)

    # -- Processor API ---------------------------------------------------------------------------------
    def add_state_store(self, store_builder: KeyValueStoreBuilder) -> StreamsBuilder:
        """Add a user key-value store (change-logged to ``<application_id>-<name>-changelog`` unless
        ``logging=False``, restored like the DSL's stores); processors list it in
        ``KStream.process(..., stores=[name])``."""
        if not isinstance(store_builder, KeyValueStoreBuilder):
            raise ValueError(f"add_state_store() needs a KeyValueStoreBuilder(name, key_serde, value_serde), "  # noqa: TRY004 - bad input is a ValueError
                             f"got {store_builder!r}")
        name = self._new_name(store_builder.name, "", "state store")
        self._add_store(StoreSpec(
            name=name, kind="key_value", owner=name,
            key_serde=self._serde(f"key of state store {name!r}", check_serde(store_builder.key_serde, "key_serde",
                                                                               f"state store {name!r}")),
            value_serde=self._serde(f"value of state store {name!r}",
                                    check_serde(store_builder.value_serde, "value_serde", f"state store {name!r}")),
            logging=bool(store_builder.logging)))
        return self

    # -- result ---------------------------------------------------------------------------------------
    def build(self, application_id: str | None = None) -> Topology:
        """The :class:`Topology` recorded so far (``application_id`` names internal topics in
        ``describe()`` and ``subtopologies``; tasks and the test driver use their own)."""
        if not self._nodes:
            raise ValueError("the topology is empty: add a stream() or table() before build()")
        return Topology(self._nodes, self._stores, application_id or self.application_id)


from .kstream import KStream
from .ktable import KTable
