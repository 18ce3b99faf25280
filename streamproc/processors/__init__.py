"""The operators the DSL compiles to. Each is a :class:`~streamproc.processors.base.Processor`."""

from .base import Processor
from .source_sink import SinkProcessor, SourceProcessor
from .session_aggregate import SessionAggregateProcessor
from .stateless import (
                        BranchProcessor,
                        FilterProcessor,
                        FlatMapProcessor,
                        FlatMapValuesProcessor,
                        MapProcessor,
                        MapValuesProcessor,
                        PassThroughProcessor,
                        PeekProcessor,
                        SelectKeyProcessor,
)
from .stream_join import StreamStreamJoinProcessor
from .table import StreamTableJoinProcessor, TableSourceProcessor
from .window_aggregate import TimeWindowAggregateProcessor

__all__ = [
                        "BranchProcessor",
                        "FilterProcessor",
                        "FlatMapProcessor",
                        "FlatMapValuesProcessor",
                        "MapProcessor",
                        "MapValuesProcessor",
                        "PassThroughProcessor",
                        "PeekProcessor",
                        "Processor",
                        "SelectKeyProcessor",
                        "SessionAggregateProcessor",
                        "SinkProcessor",
                        "SourceProcessor",
                        "StreamStreamJoinProcessor",
                        "StreamTableJoinProcessor",
                        "TableSourceProcessor",
                        "TimeWindowAggregateProcessor",
]
