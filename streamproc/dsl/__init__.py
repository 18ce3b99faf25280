"""The DSL: build a topology from streams, tables, operators, session- and time-window aggregations and joins.

Modules, each importing only those listed before it: ``options`` (operator options), ``windows``
(window kinds), ``graph`` (nodes and store specs), ``describe`` and ``topology`` (the built
topology), ``graph_builder`` (the internal builder and :class:`Flow`), ``table_graph``,
``aggregation_graph`` and ``join_graph`` (how the larger operators are recorded), ``streams`` (the
public stream and table classes) and ``builder`` (:class:`StreamsBuilder`).
"""

from ..processors.window_aggregate import ValueAndTimestamp
from ..records import Windowed
from .builder import StreamsBuilder
from .options import Consumed, Grouped, Joined, Materialized, Named, Produced
from .streams import (
    BranchedKStream,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    SessionWindowedKStream,
    TimeWindowedKStream,
)
from .topology import SubTopology, Topology
from .windows import EmitStrategy, JoinWindows, SessionWindows, TimeWindows

__all__ = [
    "BranchedKStream",
    "Consumed",
    "EmitStrategy",
    "Grouped",
    "JoinWindows",
    "Joined",
    "KGroupedStream",
    "KGroupedTable",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Produced",
    "SessionWindowedKStream",
    "SessionWindows",
    "StreamsBuilder",
    "SubTopology",
    "TimeWindowedKStream",
    "TimeWindows",
    "Topology",
    "ValueAndTimestamp",
    "Windowed",
]
