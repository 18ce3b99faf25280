"""streamproc: an asyncio stream processor for Apache Kafka.

This module is the public API; everything else is internal and may change.

::

    from streamproc import StreamsBuilder, SessionWindows, EmitStrategy, TopologyTestDriver, StreamApp, serde
"""

from __future__ import annotations

from . import _native

_native.install()  # compiled hot path, or its Python source (see streamproc/_native.py)

from . import serde
from .config import Config, ConfigError
from .dsl import (
    BranchedKStream,
    Consumed,
    EmitStrategy,
    Grouped,
    Joined,
    JoinWindows,
    KGroupedStream,
    KGroupedTable,
    KStream,
    KTable,
    Materialized,
    Named,
    Produced,
    SessionWindowedKStream,
    SessionWindows,
    StreamsBuilder,
    SubTopology,
    TimeWindowedKStream,
    TimeWindows,
    Topology,
    ValueAndTimestamp,
)
from .engine.test_driver import TopologyTestDriver
from .errors import ProcessingError, SerializationError, StreamprocError, TaskFailedError, TopologyError
from .processor import (
    STREAM_TIME,
    WALL_CLOCK_TIME,
    KeyValueStoreBuilder,
    ProcessorContext,
    PunctuationType,
    UserProcessor,
)
from .records import KeyValue, Record, Windowed
from .runtime.app import StreamApp
from .serde import Serde
from .stores import NOT_PUT, VALID_TO_UNDEFINED, Stores, VersionedRecord

__version__ = "0.1.0"

__all__ = [
    # Processor API
    "STREAM_TIME",
    "WALL_CLOCK_TIME",
    "KeyValueStoreBuilder",
    "ProcessorContext",
    "PunctuationType",
    "UserProcessor",
    # DSL
    "StreamsBuilder",
    "Topology",
    "SubTopology",
    "KStream",
    "BranchedKStream",
    "KGroupedStream",
    "KGroupedTable",
    "SessionWindowedKStream",
    "KTable",
    "SessionWindows",
    "TimeWindows",
    "TimeWindowedKStream",
    "JoinWindows",
    "ValueAndTimestamp",
    "EmitStrategy",
    "Consumed",
    "Produced",
    "Grouped",
    "Joined",
    "Materialized",
    "Named",
    # records and serdes
    "Record",
    "Windowed",
    "KeyValue",
    "Serde",
    "serde",
    # stores
    "Stores",
    "VersionedRecord",
    "NOT_PUT",
    "VALID_TO_UNDEFINED",
    # running
    "StreamApp",
    "Config",
    "ConfigError",
    "TopologyTestDriver",
    # errors
    "StreamprocError",
    "SerializationError",
    "TopologyError",
    "ProcessingError",
    "TaskFailedError",
]
