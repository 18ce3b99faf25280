"""The internal graph builder: what the DSL classes record operators with.

A :class:`GraphBuilder` holds the nodes and store specifications of one topology under
construction and hands out unique names. The public DSL classes (:mod:`streamproc.dsl.streams`) and
the modules that build the larger operators (:mod:`~streamproc.dsl.aggregation_graph`,
:mod:`~streamproc.dsl.join_graph`, :mod:`~streamproc.dsl.table_graph`) call only its public
methods.

A :class:`Flow` is a stream at one point of the graph: the node whose output it is, the serdes known
for its keys and values, and whether its key changed since it was last partitioned.

Naming: every operator gets a unique name, the one given (``name=``) or ``PREFIX-<10-digit index>``
from its position (``KSTREAM-FILTER-0000000001``), so the same code always yields the same names.
A name used twice is a ``ValueError`` at the call that reuses it.

Serdes of repartition topics and stores: the first one given, else the builder's default
(``default_serde``; ``None`` makes them mandatory, a missing one is a ``ValueError`` naming the store
or topic).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..processors.source_sink import SinkProcessor, SourceProcessor
from ..serde import Serde
from .graph import Node, StoreSpec
from .options import check_name
from .topology import Topology

__all__ = ["Flow", "GraphBuilder"]


@dataclass(frozen=True)
class Flow:
    """A stream at one point of the graph.

    ``node`` produces its records; ``key_serde``/``value_serde`` are the serdes known for them
    (None: unknown, a source's serde travels through operators that keep the key or the value);
    ``key_changed`` marks a stream whose key changed (``map``, ``select_key``...) since it was last
    partitioned: a grouping or a join routes it through a repartition topic first.
    """

    node: Node
    key_serde: Serde | None
    value_serde: Serde | None
    key_changed: bool = False


class GraphBuilder:
    """Records the nodes and stores of one topology; see the module docstring for naming and serdes."""

    def __init__(self, default_key_serde: Serde | None, default_value_serde: Serde | None) -> None:
        self.default_key_serde = default_key_serde
        self.default_value_serde = default_value_serde
        self._nodes: list[Node] = []
        self._stores: dict[str, StoreSpec] = {}
        self._names: dict[str, Node] = {}
        self._reserved: set[str] = set()
        self._source_topics: dict[str, str] = {}
        self._index = 0

    # -- names -----------------------------------------------------------------------------------------
    def new_name(self, given: str | None, prefix: str, what: str) -> str:
        """A unique name: ``given`` (checked), else ``<prefix>-<index>``; every call takes an index.
        ``what`` names the operator in the error when the name is taken."""
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

    # -- nodes -----------------------------------------------------------------------------------------
    def add_node(self, name: str, kind: str, op: str, make: Callable[[], Any], parents: Iterable[Node] = (),
                 stores: tuple[str, ...] = (), topics: tuple[str, ...] = (), internal: bool = False,
                 key_serde: Serde | None = None, value_serde: Serde | None = None) -> Node:
        """Add an operator (see :class:`~streamproc.dsl.graph.Node`) below ``parents``; ``name``
        must come from :meth:`new_name`."""
        node = Node(index=len(self._nodes), name=name, kind=kind, op=op, make=make, stores=stores,
                    topics=topics, internal=internal, key_serde=key_serde, value_serde=value_serde)
        for parent in parents:
            node.parents.append(parent)
            parent.children.append(node)
        self._nodes.append(node)
        self._names[name] = node
        return node

    def owns(self, node: Node) -> bool:
        """Whether ``node`` was added by this builder (streams of two builders never mix)."""
        return self._names.get(node.name) is node

    def add_processor(self, flow: Flow, name: str | None, prefix: str, op: str, make: Callable[[str], Any],
                      key_serde: Serde | None, value_serde: Serde | None, key_changed: bool) -> Flow:
        """One processor below ``flow`` (``make(node_name)`` creates it for a task): the flow of its output."""
        node_name = self.new_name(name, prefix, f"{op}()")
        node = self.add_node(node_name, "processor", op, lambda: make(node_name), parents=[flow.node])
        return Flow(node, key_serde, value_serde, key_changed)

    def add_source(self, name: str, topics: tuple[str, ...], key_serde: Serde | None, value_serde: Serde | None,
                   internal: bool = False) -> Node:
        """A source node reading ``topics`` (a repartition topic when ``internal``)."""
        return self.add_node(name, "source", "repartition-source" if internal else "source",
                             lambda: SourceProcessor(name, topics, key_serde, value_serde, internal=internal),
                             topics=topics, internal=internal, key_serde=key_serde, value_serde=value_serde)

    def add_sink(self, parent: Node, name: str, topic: str, key_serde: Serde | None, value_serde: Serde | None,
                 internal: bool = False, drop_null_keys: bool = False) -> Node:
        """A sink node writing ``topic`` (a repartition topic when ``internal``; records with a None
        key are dropped there when ``drop_null_keys``)."""
        return self.add_node(name, "sink", "repartition-sink" if internal else "sink",
                             lambda: SinkProcessor(name, topic, key_serde, value_serde, internal=internal,
                                                   drop_null_keys=drop_null_keys),
                             parents=[parent], topics=(topic,), internal=internal, key_serde=key_serde,
                             value_serde=value_serde)

    def repartition_through(self, parent: Node, topic: str, key_serde: Serde, value_serde: Serde,
                            drop_null_keys: bool = True) -> Node:
        """Write ``parent``'s records to the internal topic ``topic`` and read them back: the source node
        (the cut between two sub-topologies)."""
        sink_name = self.new_name(f"{topic}-sink", "", "repartition sink")
        self.add_sink(parent, sink_name, topic, key_serde, value_serde, internal=True, drop_null_keys=drop_null_keys)
        source_name = self.new_name(f"{topic}-source", "", "repartition source")
        return self.add_source(source_name, (topic,), key_serde, value_serde, internal=True)

    def repartition(self, flow: Flow, base_name: str, key_serde: Serde | None, value_serde: Serde | None,
                    drop_null_keys: bool = True) -> Flow:
        """``flow`` routed through the internal topic ``<base_name>-repartition`` (records with a None
        key are dropped there unless ``drop_null_keys`` is False: a left join keeps them). Its serdes:
        the ones given, else those known for the flow, else the defaults."""
        topic = f"{base_name}-repartition"
        ks = self.serde(f"key of repartition topic {topic!r}", key_serde, flow.key_serde)
        vs = self.serde(f"value of repartition topic {topic!r}", value_serde, flow.value_serde)
        return Flow(self.repartition_through(flow.node, topic, ks, vs, drop_null_keys), ks, vs, False)

    # -- stores ----------------------------------------------------------------------------------------
    def add_store(self, spec: StoreSpec) -> None:
        """Register a store; its name must be unique among stores and not name another operator."""
        if spec.name in self._stores or (spec.name in self._reserved and spec.name != spec.owner):
            raise ValueError(
                f"store name {spec.name!r} (of operator {spec.owner!r}) is already used in this topology; "
                f"give the operator another name"
            )
        self._stores[spec.name] = spec

    def store(self, name: str) -> StoreSpec | None:
        """The store named ``name``, None when there is none."""
        return self._stores.get(name)

    def change_store(self, name: str, **changes: Any) -> StoreSpec:
        """Replace fields of store ``name`` (e.g. its value serde once a table must keep timestamps)."""
        spec = self._stores[name] = dataclasses.replace(self._stores[name], **changes)
        return spec

    # -- topics and serdes -----------------------------------------------------------------------------
    def register_source_topic(self, topic: Any, node_name: str) -> str:
        """Claim ``topic`` for the source ``node_name``: a topic is read by one source of a topology."""
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic names must be non-empty str, got {topic!r}")
        if topic in self._source_topics:
            raise ValueError(
                f"topic {topic!r} is already a source of this topology (node {self._source_topics[topic]!r}); "
                f"read it once and reuse the KStream/KTable"
            )
        self._source_topics[topic] = node_name
        return topic

    def serde(self, what: str, *candidates: Serde | None) -> Serde:
        """The first serde among ``candidates``, else the default for ``what`` (a key when ``what``
        starts with "key"); a ``ValueError`` naming ``what`` when there is none."""
        for candidate in candidates:
            if candidate is not None:
                return candidate
        default = self.default_key_serde if what.startswith("key") else self.default_value_serde
        if default is None:
            raise ValueError(
                f"{what} needs a serde and none is known: pass key_serde=/value_serde= (or a "
                f"Materialized/Grouped) to the operator, give the source topic serdes, or build with "
                f"StreamsBuilder(default_serde=...)"
            )
        return default

    # -- result ----------------------------------------------------------------------------------------
    def build(self, application_id: str | None) -> Topology:
        """The :class:`Topology` recorded so far (a copy: later additions do not change it)."""
        if not self._nodes:
            raise ValueError("the topology is empty: add a stream() or table() before build()")
        return Topology(self._nodes, self._stores, application_id)
