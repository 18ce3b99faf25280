"""The processor protocol every operator implements.

A processor receives ``process(key, value, timestamp)`` and forwards to its children with
``self.forward(key, value, timestamp)``: a direct bound-method call (one child), a tight loop
(several), or a no-op (none). Processing is synchronous; nothing here awaits.

Processors read the record being processed (headers, position) from ``task.current`` and stores
from ``task.stores``: ``task`` is the :class:`~streamproc.processors.context.ProcessorContext` the
engine's task implements, set up before ``init``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ProcessingError, user_frame

if TYPE_CHECKING:  # pragma: no cover
    from .context import ProcessorContext

__all__ = ["Forward", "Processor", "fan_out", "kv_writer", "user_error"]

log = logging.getLogger("streamproc.processors")

Forward = Callable[[Any, Any, int], None]


def _drop(key: Any, value: Any, timestamp: int) -> None:
    """Forward target of a processor without children."""


def _targets(children: list[Processor]) -> list[Forward]:
    """The ``process`` methods a record forwarded to ``children`` reaches, in call order: a child
    that only forwards (exactly :class:`Processor` or ``PassThroughProcessor``, whose ``process``
    is the inherited one) is replaced by its own targets, so forwarding skips it."""
    out: list[Forward] = []
    for child in children:
        if type(child).passes_through and type(child).process is Processor.process:
            out.extend(_targets(child.children))
        else:
            out.append(child.process)
    return out


def fan_out(children: list[Processor]) -> Forward:
    """The cheapest forward function for ``children``."""
    targets = tuple(_targets(children))
    if not targets:
        return _drop
    if len(targets) == 1:
        return targets[0]

    def forward(key: Any, value: Any, timestamp: int) -> None:
        for target in targets:
            target(key, value, timestamp)

    return forward


def kv_writer(store: Any) -> tuple[Callable[[Any, Any, int], Any], Callable[[Any, int], Any]]:
    """``(put(key, value, ts), delete(key, ts))`` for a key-value store; a change-logged store gets
    ``ts`` as the changelog record's timestamp, a plain one ignores it."""
    put = store.put
    delete = store.delete
    if hasattr(store, "set_record_timestamp"):
        return (lambda k, v, ts: put(k, v, timestamp=ts)), (lambda k, ts: delete(k, timestamp=ts))
    return (lambda k, v, ts: put(k, v)), (lambda k, ts: delete(k))


def user_error(operator: str, what: str, exc: BaseException, key: Any) -> ProcessingError:
    """A :class:`ProcessingError` for a user function ``what`` of ``operator`` that raised ``exc``:
    the message names the exception, where in the user's code it was raised and the record's key.

    The task adds the record's topic, partition and offset before it propagates.
    """
    frame = user_frame(exc)
    at = f"in {frame[0]} at {frame[1]}:{frame[2]}; " if frame is not None else ""
    return ProcessingError(
        f"{what} of operator {operator!r} raised {type(exc).__name__}: {exc} ({at}record key {key!r})",
        key=key,
        operator=operator,
    )


class Processor:
    """Base class: a node of a task's processor graph."""

    __slots__ = ("_logged", "children", "forward", "late_example", "name", "task")

    def __init__(self, name: str) -> None:
        self.name = name
        self.children: list[Processor] = []
        self.forward: Forward = _drop
        self.task: ProcessorContext | None = None
        self._logged: set[str] = set()
        #: the last record dropped as late: ``(topic, partition, offset, timestamp, stream time)``
        self.late_example: tuple[Any, Any, Any, int, int] | None = None

    def init(self, task: ProcessorContext) -> None:
        """Called once per task after its stores are restored and before the first record."""
        self.task = task
        self.forward = fan_out(self.children)

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.forward(key, value, timestamp)

    #: True for processors whose :meth:`flush` must run after every batch.
    needs_flush = False
    #: True for a node that forwards every record unchanged and has no other effect (its parents
    #: then forward straight to its children). Subclasses overriding ``process`` never count.
    passes_through = False

    def flush(self) -> None:
        """Write state kept in memory during a batch (progress markers) to the stores. The task calls
        it at the end of every ``process`` batch, before the runtime drains the changelogs."""

    def punctuate_wall_clock(self, now_ms: int) -> None:
        """Wall-clock driven work (none by default)."""

    def close(self) -> None:
        """Release resources (none by default)."""

    def metrics(self) -> dict[str, int]:
        """Counters of this operator (names are ``dropped_records_<reason>`` and the like)."""
        return {}

    def note_late(self, timestamp: int, stream_time: int) -> None:
        """Remember the record being processed as the latest one this operator dropped as late
        (the runtime's late-drop warning quotes it); the caller counts the drop."""
        record = self.task.current  # type: ignore[union-attr]
        self.late_example = (record.topic, record.partition, record.offset, timestamp, stream_time)

    def log_once(self, cause: str, message: str) -> None:
        """Log ``message`` at WARNING the first time ``cause`` happens in this operator."""
        if cause not in self._logged:
            self._logged.add(cause)
            log.warning("%s (operator %r; logged once per cause, see the dropped_records metric)",
                        message, self.name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
