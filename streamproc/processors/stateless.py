"""Stateless operators: filter, map, map_values, flat_map, flat_map_values, peek, select_key, branch.

Each wraps its user function in ``try``; an exception becomes a
:class:`~streamproc.errors.ProcessingError` naming the operator and the record key (the task adds
topic, partition and offset). Exceptions raised further downstream pass through unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .base import Processor, fan_out, user_error

__all__ = [
    "BranchProcessor",
    "FilterProcessor",
    "FlatMapProcessor",
    "FlatMapValuesProcessor",
    "MapProcessor",
    "MapValuesProcessor",
    "PassThroughProcessor",
    "PeekProcessor",
    "SelectKeyProcessor",
]


class PassThroughProcessor(Processor):
    """Forwards every record unchanged (merge points, branch outputs, ``KTable.to_stream``); its
    parents forward straight to its children (:func:`~streamproc.processors.base.fan_out`)."""

    __slots__ = ()
    passes_through = True


class FilterProcessor(Processor):
    """Forwards records for which ``predicate(key, value)`` is truthy (falsy when ``negate``)."""

    __slots__ = ("negate", "predicate")

    def __init__(self, name: str, predicate: Callable[[Any, Any], Any], negate: bool = False) -> None:
        super().__init__(name)
        self.predicate = predicate
        self.negate = negate

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            keep = self.predicate(key, value)
        except Exception as exc:
            raise user_error(self.name, "predicate", exc, key) from exc
        if bool(keep) is not self.negate:
            self.forward(key, value, timestamp)


def _pair(result: Any, operator: str, what: str, key: Any) -> tuple[Any, Any]:
    try:
        new_key, new_value = result
    except (TypeError, ValueError) as exc:
        raise user_error(
            operator, what, TypeError(f"must return a (key, value) pair, got {result!r}"), key
        ) from exc
    return new_key, new_value


class MapProcessor(Processor):
    """``mapper(key, value) -> (new_key, new_value)``."""

    __slots__ = ("mapper",)

    def __init__(self, name: str, mapper: Callable[[Any, Any], Any]) -> None:
        super().__init__(name)
        self.mapper = mapper

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            result = self.mapper(key, value)
        except Exception as exc:
            raise user_error(self.name, "mapper", exc, key) from exc
        if type(result) is tuple and len(result) == 2:  # the common case, without a call
            self.forward(result[0], result[1], timestamp)
            return
        new_key, new_value = _pair(result, self.name, "mapper", key)
        self.forward(new_key, new_value, timestamp)


class MapValuesProcessor(Processor):
    """``mapper(value)`` (or ``mapper(key, value)`` when ``with_key``) -> new value; key unchanged."""

    __slots__ = ("mapper", "with_key")

    def __init__(self, name: str, mapper: Callable[..., Any], with_key: bool = False) -> None:
        super().__init__(name)
        self.mapper = mapper
        self.with_key = with_key

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            new_value = self.mapper(key, value) if self.with_key else self.mapper(value)
        except Exception as exc:
            raise user_error(self.name, "value mapper", exc, key) from exc
        self.forward(key, new_value, timestamp)


class FlatMapProcessor(Processor):
    """``mapper(key, value) -> iterable of (key, value)``; each pair is forwarded in order."""

    __slots__ = ("mapper",)

    def __init__(self, name: str, mapper: Callable[[Any, Any], Any]) -> None:
        super().__init__(name)
        self.mapper = mapper

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            results = list(self.mapper(key, value))
        except Exception as exc:
            raise user_error(self.name, "flat mapper", exc, key) from exc
        forward = self.forward
        for result in results:
            new_key, new_value = _pair(result, self.name, "flat mapper", key)
            forward(new_key, new_value, timestamp)


class FlatMapValuesProcessor(Processor):
    """``mapper(value)`` (or ``mapper(key, value)``) -> iterable of values, each forwarded with the key."""

    __slots__ = ("mapper", "with_key")

    def __init__(self, name: str, mapper: Callable[..., Any], with_key: bool = False) -> None:
        super().__init__(name)
        self.mapper = mapper
        self.with_key = with_key

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            results = list(self.mapper(key, value) if self.with_key else self.mapper(value))
        except Exception as exc:
            raise user_error(self.name, "flat value mapper", exc, key) from exc
        forward = self.forward
        for new_value in results:
            forward(key, new_value, timestamp)


class PeekProcessor(Processor):
    """Calls ``action(key, value)`` and forwards the record unchanged."""

    __slots__ = ("action",)

    def __init__(self, name: str, action: Callable[[Any, Any], Any]) -> None:
        super().__init__(name)
        self.action = action

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            self.action(key, value)
        except Exception as exc:
            raise user_error(self.name, "peek action", exc, key) from exc
        self.forward(key, value, timestamp)


class SelectKeyProcessor(Processor):
    """``selector(key, value) -> new key``; value unchanged."""

    __slots__ = ("selector",)

    def __init__(self, name: str, selector: Callable[[Any, Any], Any]) -> None:
        super().__init__(name)
        self.selector = selector

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        try:
            new_key = self.selector(key, value)
        except Exception as exc:
            raise user_error(self.name, "key selector", exc, key) from exc
        self.forward(new_key, value, timestamp)


class BranchProcessor(Processor):
    """Sends each record to the first branch whose predicate holds (``None`` = default branch).

    ``children[i]`` is the output of ``predicates[i]``; a record no predicate matches is dropped.
    """

    __slots__ = ("_routes", "predicates")

    def __init__(self, name: str, predicates: list[Callable[[Any, Any], Any] | None]) -> None:
        super().__init__(name)
        self.predicates = predicates
        self._routes: tuple[tuple[Callable[[Any, Any], Any] | None, Any], ...] = ()

    def init(self, task: Any) -> None:
        super().init(task)
        self._routes = tuple(
            (pred, fan_out([child])) for pred, child in zip(self.predicates, self.children)
        )

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        for predicate, target in self._routes:
            if predicate is not None:
                try:
                    hit = predicate(key, value)
                except Exception as exc:
                    raise user_error(self.name, "branch predicate", exc, key) from exc
                if not hit:
                    continue
            target(key, value, timestamp)
            return
