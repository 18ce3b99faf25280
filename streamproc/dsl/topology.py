"""A built topology: its nodes, stores, sub-topologies and a readable description.

A **sub-topology** is a connected component of the operator graph, where operators sharing a store
are connected too (a versioned table and the stream joined with it); a repartition topic cuts the
graph: its sink belongs to the upstream sub-topology and its source to the downstream one. A task
runs one partition of one sub-topology.

Repartition topics are internal: their run-time name is ``<application_id>-<name>-repartition``.
:meth:`Topology.subtopologies_for` resolves them for an application id; the
:attr:`Topology.subtopologies` property uses the topology's own ``application_id`` (set with
``StreamsBuilder.build(application_id=...)``) or shows the bare internal names when it has none.
"""

from __future__ import annotations

from dataclasses import replace

from ..serde import Serde
from .describe import describe_mermaid, describe_text
from .graph import Node, StoreSpec, SubTopology, changelog_topic_name

__all__ = ["SubTopology", "Topology"]


class Topology:
    """The immutable result of :meth:`StreamsBuilder.build`."""

    def __init__(self, nodes: list[Node], stores: dict[str, StoreSpec],
                 application_id: str | None = None) -> None:
        # Own copies: a builder that goes on adding operators must not change a built topology.
        copies = {n.name: replace(n, parents=[], children=[]) for n in nodes}
        for n in nodes:
            copies[n.name].parents = [copies[p.name] for p in n.parents if p.name in copies]
            copies[n.name].children = [copies[c.name] for c in n.children if c.name in copies]
        self.nodes: tuple[Node, ...] = tuple(copies[n.name] for n in nodes)
        self.stores: dict[str, StoreSpec] = dict(stores)
        self.application_id = application_id
        self._by_name = {n.name: n for n in self.nodes}
        self._components = self._find_components()

    # -- structure ------------------------------------------------------------------------------
    def _find_components(self) -> list[list[Node]]:
        parent = {n.name: n.name for n in self.nodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[rb] = ra

        owners: dict[str, str] = {}
        for node in self.nodes:
            for child in node.children:
                union(node.name, child.name)
            for store in node.stores:
                if store in owners:
                    union(owners[store], node.name)
                else:
                    owners[store] = node.name
        groups: dict[str, list[Node]] = {}
        for node in self.nodes:
            groups.setdefault(find(node.name), []).append(node)
        return sorted(groups.values(), key=lambda g: g[0].index)

    def node(self, name: str) -> Node:
        return self._by_name[name]

    def subtopology_nodes(self, subtopology_id: int) -> list[Node]:
        """The nodes of a sub-topology, in creation order."""
        if not 0 <= subtopology_id < len(self._components):
            raise ValueError(
                f"unknown sub-topology {subtopology_id!r}; this topology has ids 0..{len(self._components) - 1}"
            )
        return self._components[subtopology_id]

    def _topic(self, node: Node, topic: str, application_id: str | None) -> str:
        if node.internal and application_id is not None:
            return f"{application_id}-{topic}"
        return topic

    def subtopologies_for(self, application_id: str | None) -> list[SubTopology]:
        """The sub-topologies with internal and changelog topics named for ``application_id``
        (bare internal names, and ``<application_id>`` in changelog names, when it is None)."""
        app = application_id
        out = []
        for i, nodes in enumerate(self._components):
            sources: set[str] = set()
            sinks: set[str] = set()
            internal: set[str] = set()
            store_names: set[str] = set()
            for node in nodes:
                topics = {self._topic(node, t, app) for t in node.topics}
                if node.kind == "source":
                    sources |= topics
                elif node.kind == "sink":
                    sinks |= topics
                if node.internal:
                    internal |= topics
                store_names.update(node.stores)
            specs = tuple(self.stores[s] for s in sorted(store_names))
            app_name = app if app is not None else "<application_id>"
            changelogs = {s.name: changelog_topic_name(app_name, s.name) for s in specs if s.logging}
            configs = {changelogs[s.name]: s.changelog_config() for s in specs if s.logging}
            out.append(SubTopology(
                id=i, nodes=tuple(n.name for n in nodes), source_topics=frozenset(sources),
                sink_topics=frozenset(sinks), repartition_topics=frozenset(internal),
                store_names=frozenset(store_names), stores=specs, changelog_topics=changelogs,
                changelog_configs=configs,
            ))
        return out

    @property
    def subtopologies(self) -> list[SubTopology]:
        """:meth:`subtopologies_for` the topology's ``application_id``."""
        return self.subtopologies_for(self.application_id)

    def source_topics(self, application_id: str | None = None) -> set[str]:
        """Every topic the topology reads (internal ones resolved for ``application_id``)."""
        app = application_id if application_id is not None else self.application_id
        return {self._topic(n, t, app) for n in self.nodes if n.kind == "source" for t in n.topics}

    def sink_topics(self, application_id: str | None = None) -> set[str]:
        """Every topic the topology writes (internal ones resolved for ``application_id``)."""
        app = application_id if application_id is not None else self.application_id
        return {self._topic(n, t, app) for n in self.nodes if n.kind == "sink" for t in n.topics}

    def _find_topic_node(self, topic: str, kind: str, application_id: str | None) -> Node | None:
        app = application_id if application_id is not None else self.application_id
        for node in self.nodes:
            if node.kind != kind:
                continue
            for t in node.topics:
                if topic == t and not node.internal:
                    return node
                if node.internal and (topic == t or (app is not None and topic == f"{app}-{t}")
                                      or (app is None and topic.endswith("-" + t))):
                    return node
        return None

    def source_serdes(self, topic: str, application_id: str | None = None) -> tuple[Serde | None, Serde | None]:
        """``(key_serde, value_serde)`` of the source reading ``topic`` (None where not configured)."""
        node = self._find_topic_node(topic, "source", application_id)
        if node is None:
            raise ValueError(f"topic {topic!r} is not a source of this topology; sources: "
                             f"{sorted(self.source_topics(application_id))}")
        return node.key_serde, node.value_serde

    def sink_serdes(self, topic: str, application_id: str | None = None) -> tuple[Serde | None, Serde | None]:
        """``(key_serde, value_serde)`` of the (first) sink writing ``topic``."""
        node = self._find_topic_node(topic, "sink", application_id)
        if node is None:
            raise ValueError(f"topic {topic!r} is not a sink of this topology; sinks: "
                             f"{sorted(self.sink_topics(application_id))}")
        return node.key_serde, node.value_serde

    # -- description ----------------------------------------------------------------------------
    def describe(self, format: str = "text", application_id: str | None = None) -> str:
        """A readable description: ``format="text"`` (Kafka Streams style) or ``"mermaid"`` (a
        flowchart only). Repartition and changelog topics are named for ``application_id`` (default:
        the topology's own; with neither, changelogs show an ``<application_id>`` placeholder)."""
        app = application_id if application_id is not None else self.application_id
        if format == "text":
            return describe_text(self.subtopologies_for(app), self.node, app)
        if format == "mermaid":
            return describe_mermaid(self.subtopologies_for(app), self.node, app)
        raise ValueError(f"unknown describe format {format!r}; use 'text' or 'mermaid'")

    def to_mermaid(self) -> str:
        """``describe(format="mermaid")``: a Mermaid flowchart for documentation."""
        return self.describe("mermaid")

    def __str__(self) -> str:
        return self.describe()

    def __repr__(self) -> str:
        return (f"Topology(subtopologies={len(self._components)}, nodes={len(self.nodes)}, "
                f"stores={sorted(self.stores)})")


