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
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .graph import Node
    from .topology import Topology

__all__ = ["describe_mermaid", "describe_text"]


def _topics(topology: Topology, node: Node) -> list[str]:
    app = topology.application_id
    if node.internal:
        return [f"{app}-{t}" if app else t for t in node.topics]
    return list(node.topics)


def describe_text(topology: Topology) -> str:
    lines = ["Topologies:"]
    app = topology.application_id or "<application_id>"
    for sub in topology.subtopologies:
        lines.append(f"   Sub-topology: {sub.id}")
        for name in sub.nodes:
            node = topology.node(name)
            topics = _topics(topology, node)
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
                describe_extra = getattr(spec, "describe_extra", None)
                if describe_extra is not None:
                    extra.extend(describe_extra())
                extra.append(f"changelog: {spec.changelog_topic(app)}" if spec.logging else "no changelog")
                lines.append(f"      {spec.name} ({spec.kind}, {', '.join(extra)})")
        lines.append("")
    return "\n".join(lines)


def _id(prefix: str, name: str) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_]", "_", name)


def describe_mermaid(topology: Topology) -> str:
    """A Mermaid ``flowchart`` with one subgraph per sub-topology; topics as stadiums, stores as cylinders."""
    lines = ["flowchart TD"]
    edges: list[str] = []
    topics_seen: set[str] = set()
    for sub in topology.subtopologies:
        lines.append(f'  subgraph sub{sub.id}["Sub-topology {sub.id}"]')
        for name in sub.nodes:
            node = topology.node(name)
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
            node = topology.node(name)
            for topic in _topics(topology, node):
                tid = _id("t_", topic)
                if tid not in topics_seen:
                    topics_seen.add(tid)
                    lines.append(f'  {tid}(["{topic}"])')
                if node.kind == "source":
                    edges.append(f"  {tid} --> {_id('n_', node.name)}")
                else:
                    edges.append(f"  {_id('n_', node.name)} --> {tid}")
    return "\n".join(lines + edges) + "\n"
