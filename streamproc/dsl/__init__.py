"""The DSL: build a topology from streams, tables, operators and session-window aggregations."""

from ..records import Windowed
from .builder import StreamsBuilder
from .kgrouped import KGroupedStream, SessionWindowedKStream
from .kstream import BranchedKStream, KStream
from .ktable import KTable
from .options import Consumed, Grouped, Joined, Materialized, Named, Produced
from .topology import SubTopology, Topology
from .windows import EmitStrategy, SessionWindows

__all__ = [
    "BranchedKStream",
    "Consumed",
    "EmitStrategy",
    "Grouped",
    "Joined",
    "KGroupedStream",
    "KStream",
    "KTable",
    "Materialized",
    "Named",
    "Produced",
    "SessionWindowedKStream",
    "SessionWindows",
    "StreamsBuilder",
    "SubTopology",
    "Topology",
    "Windowed",
]
