"""Text and Mermaid renderings of a :class:`~streamproc.dsl.topology.Topology`.

Text (Kafka Streams style)::

    Topologies:
       Sub-topology: 0
        Source: KSTREAM-SOURCE-0000000000 (topics: [clicks])
          --> KSTREAM-AGGREGATE-0000000001
        Processor: KSTREAM-AGGREGATE-0000000001 (session-aggregate; stores: [KSTREAM-AGGREGATE-0000000001])
          --> KTABLE-TOSTREAM-0000000002
          <-- KSTREAM-SOURCE-0000000000
        ...
      Stores:
        KSTREAM-AGGREGATE-0000000001 (session, retention=300000 ms, changelog: <app>-...-changelog)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from .graph import Node, SubTopology

__all__ = ["describe_mermaid", "describe_text"]


def _topics(app: str | None, node: Node) -> list[str]:
    if node.internal:
        return [f"{app}-{t}" if app else t for t in node.topics]
    return list(node.topics)


def describe_text(subtopologies: Sequence[SubTopology], node_named: Callable[[str], Node],
                  application_id: str | None) -> str:
    """Kafka Streams' text form: each sub-topology's nodes with their topics, stores and edges, then
    its stores (``<application_id>`` stands in changelog names when ``application_id`` is None)."""
    lines = ["Topologies:"]
    app = application_id or "<application_id>"
    for sub in subtopologies:
        lines.append(f"   Sub-topology: {sub.id}")
        for name in sub.nodes:
            node = node_named(name)
            topics = _topics(application_id, node)
            if node.kind == "source":
                lines.append(f"    Source: {node.name} (topics: [{', '.join(topics)}])")
            elif node.kind == "sink":
                lines.append(f"    Sink: {node.name} (topic: {topics[0]})")
            else:
                stores = f"; stores: [{', '.join(node.stores)}]" if node.stores else ""
                lines.append(f"    Processor: {node.name} ({node.op}{stores})")
            if node.children:
                lines.append(f"      --> {', '.join(c.name for c in node.children)}")
            if node.parents:
                lines.append(f"      <-- {', '.join(p.name for p in node.parents)}")
        if sub.stores:
            lines.append("    Stores:")
            for spec in sub.stores:
                extra = []
                if spec.retention_ms is not None:
                    extra.append(f"retention={spec.retention_ms} ms")
                if spec.history_retention_ms is not None:
                    extra.append(f"history retention={spec.history_retention_ms} ms")
                extra.extend(spec.describe_extra())
                extra.append(f"changelog: {spec.changelog_topic(app)}" if spec.logging else "no changelog")
                lines.append(f"      {spec.name} ({spec.kind}, {', '.join(extra)})")
        lines.append("")
    return "\n".join(lines)


def _id(prefix: str, name: str) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)


def describe_mermaid(subtopologies: Sequence[SubTopology], node_named: Callable[[str], Node],
                     application_id: str | None) -> str:
    """A Mermaid ``flowchart`` with one subgraph per sub-topology; topics as stadiums, stores as cylinders."""
    lines = ["flowchart TD"]
    edges: list[str] = []
    topics_seen: set[str] = set()
    for sub in subtopologies:
        lines.append(f'  subgraph sub{sub.id}["Sub-topology {sub.id}"]')
        for name in sub.nodes:
            node = node_named(name)
            nid = _id("n_", node.name)
            lines.append(f'    {nid}["{node.name}<br/>{node.op}"]')
            for child in node.children:
                edges.append(f"  {nid} --> {_id('n_', child.name)}")
            for store in node.stores:
                edges.append(f"  {nid} -.- {_id('s_', store)}")
        for spec in sub.stores:
            lines.append(f'    {_id("s_", spec.name)}[("{spec.name}<br/>{spec.kind} store")]')
        lines.append("  end")
        for name in sub.nodes:
            node = node_named(name)
            for topic in _topics(application_id, node):
                tid = _id("t_", topic)
                if tid not in topics_seen:
                    topics_seen.add(tid)
                    lines.append(f'  {tid}(["{topic}"])')
                if node.kind == "source":
                    edges.append(f"  {tid} --> {_id('n_', node.name)}")
                else:
                    edges.append(f"  {_id('n_', node.name)} --> {tid}")
    return "\n".join(lines + edges) + "\n"
