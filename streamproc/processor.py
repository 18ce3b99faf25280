"""The Processor API (public): subclass :class:`UserProcessor`, add stores with
``StreamsBuilder.add_state_store(KeyValueStoreBuilder(...))`` and run it with
``KStream.process(factory, stores=[...])``. docs/dsl.md, "Processor API"."""

from __future__ import annotations

from .dsl.graph import KeyValueStoreBuilder
from .processors.user import (
    STREAM_TIME,
    WALL_CLOCK_TIME,
    Cancellable,
    ProcessorContext,
    PunctuationType,
    UserProcessor,
)

__all__ = ["STREAM_TIME", "WALL_CLOCK_TIME", "Cancellable", "KeyValueStoreBuilder", "ProcessorContext",
           "PunctuationType", "UserProcessor"]
