"""What a processor may use of the task it runs in: :class:`ProcessorContext`, and the
:class:`OutputRecord` its sinks append.

The engine's :class:`~streamproc.engine.task.Task` implements the protocol; processors depend on
this module only, never on the runtime (layers import downward).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

__all__ = ["NO_HEADERS", "OutputRecord", "ProcessorContext"]

NO_HEADERS: Sequence[tuple[str, bytes]] = ()


class OutputRecord(NamedTuple):
    """A record a task's sink produced.

    ``key``/``value`` are bytes when the sink has a serde, else the Python objects the topology made.
    """

    topic: str
    key: Any
    value: Any
    timestamp: int
    headers: Sequence[tuple[str, bytes]] = NO_HEADERS


class ProcessorContext(Protocol):
    """The task a processor is initialised with (``Processor.init(context)``).

    - ``application_id``: resolves internal topic names;
    - ``stores``: ``{store name: store}`` (restored before ``init``);
    - ``processors``: ``{node name: processor}`` of the same task (a join's two sides find each other);
    - ``current``: the record being processed (``topic``, ``partition``, ``offset``, ``timestamp``,
      ``key``, ``value`` as fetched, ``headers``), or a record-less stand-in outside ``process``;
    - ``outputs``: the list sinks append :class:`OutputRecord` s to;
    - ``released_error_handler``: called with ``(ProcessingError, origin)`` when a record released
      from a buffer fails (None: the error propagates).
    """

    @property
    def application_id(self) -> str:
        """The application id."""

    @property
    def stores(self) -> Mapping[str, Any]:
        """The task's stores by name."""

    @property
    def processors(self) -> Mapping[str, Any]:
        """The task's processors by node name."""

    @property
    def current(self) -> Any:
        """The record being processed."""

    @property
    def outputs(self) -> list[OutputRecord]:
        """Where sinks append their records."""

    @property
    def released_error_handler(self) -> Callable[[Any, Any], None] | None:
        """The handler of errors in records released from buffers, or None."""
