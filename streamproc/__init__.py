"""streamproc: an asyncio stream processor for Apache Kafka.

This module is the public API; everything else is internal and may change.
"""

from __future__ import annotations

from . import serde
from .errors import ProcessingError, SerializationError, StreamprocError, TaskFailedError, TopologyError
from .records import KeyValue, Record, Windowed

__version__ = "0.1.0"

__all__ = [
    "serde",
    "Record",
    "Windowed",
    "KeyValue",
    "StreamprocError",
    "SerializationError",
    "TopologyError",
    "ProcessingError",
    "TaskFailedError",
]
