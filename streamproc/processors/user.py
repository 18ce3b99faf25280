"""The Processor API: user processors (:class:`UserProcessor`) with stores, forwarding to named
children, punctuation on stream time and wall-clock time, and the metadata of the record being
processed, through a :class:`ProcessorContext`.

Punctuation follows Kafka Streams' ``PunctuationQueue``/``PunctuationSchedule``:

- ``STREAM_TIME``: schedules are aligned to 0. After each record the node processes, stream time
  (the largest input record timestamp seen so far by the node's task graph at this node) is
  compared with the next due time; when reached, the callback runs **once** with the current stream
  time, however many interval boundaries were crossed, and the next due time becomes the first
  boundary after it (missed intervals are skipped, not replayed). The first punctuation happens
  with the first record.
- ``WALL_CLOCK_TIME``: first due ``interval`` after the first wall-clock tick the node sees
  (``Task.punctuate_wall_clock``), then the same rule with the wall clock.

A callback may cancel its own schedule (``handle.cancel()``).
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ProcessingError
from .base import Processor, fan_out, user_error

__all__ = ["STREAM_TIME", "WALL_CLOCK_TIME", "Cancellable", "ProcessorContext", "PunctuationType",
           "UserProcessor", "UserProcessorNode"]


class PunctuationType(enum.Enum):
    """The clock of a punctuation (Kafka Streams' ``PunctuationType``)."""

    STREAM_TIME = "stream_time"
    WALL_CLOCK_TIME = "wall_clock_time"


STREAM_TIME = PunctuationType.STREAM_TIME
WALL_CLOCK_TIME = PunctuationType.WALL_CLOCK_TIME
_NO_TIME = -(2**63)


class Cancellable:
    """The handle :meth:`ProcessorContext.schedule` returns; ``cancel()`` stops the punctuation."""

    __slots__ = ("callback", "cancelled", "due", "interval", "type")

    def __init__(self, interval: int, type_: PunctuationType, callback: Callable[[int], Any], due: int | None) -> None:
        self.interval = interval
        self.type = type_
        self.callback = callback
        self.due = due
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True



def _next_due(due: int, interval: int, now: int) -> int:
    """The due time after a punctuation due at ``due`` ran at ``now``: ``due + interval``, or the
    first ``due + k * interval`` after ``now`` when ``now`` already reached it (missed ones are skipped)."""
    nxt = due + interval
    if now >= nxt:
        nxt = due + ((now - due) // interval + 1) * interval
    return nxt


class UserProcessor(abc.ABC):
    """Subclass it and pass the class (or any zero-argument factory) to ``KStream.process``.

    ``init(context)`` runs once per task, after the stores are restored; ``process(key, value,
    timestamp)`` (abstract: a subclass must define it) for each record; ``close()`` when the task
    closes. ``self.context`` is the :class:`ProcessorContext` after ``init``.
    """

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context

    @abc.abstractmethod
    def process(self, key: Any, value: Any, timestamp: int) -> None:
        """Handle one record (forward results with ``self.context.forward``)."""

    def close(self) -> None:
        """Release resources (none by default)."""


class ProcessorContext:
    """What a :class:`UserProcessor` may use of its task: forward, stores, punctuation, metadata."""

    __slots__ = ("_node",)

    def __init__(self, node: UserProcessorNode) -> None:
        self._node = node

    @property
    def application_id(self) -> str:
        return self._node.task.application_id  # type: ignore[union-attr]

    @property
    def operator(self) -> str:
        """The name of the processor's node."""
        return self._node.name

    # -- record metadata (of the input record being processed; None/-1 in a wall-clock punctuation)
    @property
    def topic(self) -> str | None:
        return self._node.task.current.topic  # type: ignore[union-attr, no-any-return]

    @property
    def partition(self) -> int | None:
        return self._node.task.current.partition  # type: ignore[union-attr, no-any-return]

    @property
    def offset(self) -> int | None:
        return self._node.task.current.offset  # type: ignore[union-attr, no-any-return]

    @property
    def timestamp(self) -> int:
        """The timestamp of the record being processed (in a punctuation: the punctuation's time)."""
        return self._node.now if self._node.now is not None else self._node.task.current.timestamp  # type: ignore[union-attr, no-any-return]

    @property
    def headers(self) -> Sequence[tuple[str, bytes]]:
        return self._node.task.current.headers  # type: ignore[union-attr, no-any-return]

    def forward(self, key: Any, value: Any, timestamp: int | None = None, to: str | None = None) -> None:
        """Send ``(key, value)`` to the children (``to``: only the child node of that name).
        ``timestamp`` None: the current record's (or punctuation's) timestamp."""
        node = self._node
        ts = self.timestamp if timestamp is None else timestamp
        if to is None:
            node.forward(key, value, ts)
            return
        child = node.by_name.get(to)
        if child is None:
            raise ValueError(f"forward(to={to!r}) in processor {node.name!r}: no child of that name; its children: "
                             f"{sorted(node.by_name)} (name them with process(..., name=...) or to(..., name=...))")
        child(key, value, ts)

    def get_state_store(self, name: str) -> Any:
        """The store ``name``; it must be listed in ``process(..., stores=[...])``."""
        node = self._node
        if name not in node.store_names:
            raise ValueError(f"processor {node.name!r} has no store {name!r}; its stores: {sorted(node.store_names)} "
                             f"(add it with StreamsBuilder.add_state_store and list it in process(stores=[...]))")
        return node.task.stores[name]  # type: ignore[union-attr]

    def schedule(self, interval: int, type: PunctuationType, callback: Callable[[int], Any]) -> Cancellable:
        """Call ``callback(time_ms)`` every ``interval`` ms of ``type`` time (rules: module docstring)."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0:
            raise ValueError(f"schedule() interval must be a positive int of milliseconds, got {interval!r}")
        if not isinstance(type, PunctuationType):
            raise ValueError(f"schedule() type must be STREAM_TIME or WALL_CLOCK_TIME, got {type!r}")  # noqa: TRY004 - bad input is a ValueError
        if not callable(callback):
            raise ValueError(f"schedule() callback must be callable with the time in ms, got {callback!r}")  # noqa: TRY004 - bad input is a ValueError
        handle = Cancellable(interval, type, callback, 0 if type is STREAM_TIME else None)
        self._node.schedules.append(handle)
        return handle


class UserProcessorNode(Processor):
    """The engine side of a :class:`UserProcessor`: errors, punctuation, stores."""

    __slots__ = ("by_name", "factory", "now", "schedules", "stampers", "store_names", "stream_time", "user")

    def __init__(self, name: str, factory: Callable[[], Any], store_names: tuple[str, ...]) -> None:
        super().__init__(name)
        self.factory = factory
        self.store_names = frozenset(store_names)
        self.user: Any = None
        self.by_name: Mapping[str, Any] = {}
        self.schedules: list[Cancellable] = []
        self.stream_time = _NO_TIME
        self.now: int | None = None
        #: ``set_record_timestamp`` of the change-logged stores (changelog records get the record's time)
        self.stampers: list[Callable[[int | None], None]] = []

    def init(self, task: Any) -> None:
        super().init(task)
        self.by_name = {c.name: fan_out([c]) for c in self.children}
        self.stampers = [s.set_record_timestamp for n in sorted(self.store_names)
                         if hasattr(s := task.stores[n], "set_record_timestamp")]
        try:
            user = self.factory()
        except Exception as exc:
            raise user_error(self.name, "processor factory", exc, None) from exc
        if not callable(getattr(user, "process", None)):
            raise ValueError(f"the processor factory of {self.name!r} returned {user!r}, which has no "  # noqa: TRY004 - bad input is a ValueError
                             f"process(key, value, timestamp); return a UserProcessor")
        self.user = user
        try:
            user.init(ProcessorContext(self))
        except ProcessingError:
            raise
        except Exception as exc:
            raise user_error(self.name, "init()", exc, None) from exc

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for stamp in self.stampers:
            stamp(timestamp)
        try:
            self.user.process(key, value, timestamp)
        except ProcessingError:
            raise
        except Exception as exc:
            raise user_error(self.name, "process()", exc, key) from exc
        ts = self.task.current.timestamp  # type: ignore[union-attr]
        if ts is None or ts < 0:
            ts = timestamp
        if ts > self.stream_time:
            self.stream_time = ts
        if self.schedules:
            self._punctuate(STREAM_TIME, self.stream_time)

    def punctuate_wall_clock(self, now_ms: int) -> None:
        for handle in self.schedules:
            if handle.type is WALL_CLOCK_TIME and handle.due is None:
                handle.due = now_ms + handle.interval
        self._punctuate(WALL_CLOCK_TIME, now_ms)

    def _punctuate(self, type_: PunctuationType, now: int) -> None:
        for handle in list(self.schedules):
            if handle.type is not type_ or handle.cancelled or handle.due is None or handle.due > now:
                continue
            self.now = now
            for stamp in self.stampers:
                stamp(now)
            try:
                handle.callback(now)
            except ProcessingError:
                raise
            except Exception as exc:
                raise user_error(self.name, f"{type_.name} punctuation", exc, None) from exc
            finally:
                self.now = None
            handle.due = _next_due(handle.due, handle.interval, now)
        self.schedules = [h for h in self.schedules if not h.cancelled]

    def close(self) -> None:
        if self.user is not None:
            try:
                self.user.close()
            except Exception as exc:
                raise user_error(self.name, "close()", exc, None) from exc
