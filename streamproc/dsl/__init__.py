"""The DSL: build a topology from streams, tables, operators, session- and time-window aggregations and joins."""

from ..processors.window_aggregate import ValueAndTimestamp
from ..records import Windowed
from .builder import StreamsBuilder
from .kgrouped import KGroupedStream, SessionWindowedKStream
from .kgrouped_table import KGroupedTable
from .kstream import BranchedKStream, KStream
from .ktable import KTable
from .options import Consumed, Grouped, Joined, Materialized, Named, Produced
from .time_windowed import TimeWindowedKStream
from .time_windows import JoinWindows, TimeWindows
from .topology import SubTopology, Topology
from .windows import EmitStrategy, SessionWindows

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
