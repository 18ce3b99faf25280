"""fan_out: forwarding skips nodes that only pass records through, and keeps the call order."""

from __future__ import annotations

from typing import Any

from streamproc.processors.base import Processor, fan_out
from streamproc.processors.stateless import PassThroughProcessor


class _Sink(Processor):
    __slots__ = ("seen",)

    def __init__(self, name: str, seen: list[tuple[str, Any]]) -> None:
        super().__init__(name)
        self.seen = seen

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.seen.append((self.name, key))


class _CountingPassThrough(PassThroughProcessor):
    """Overrides process: not a pure pass-through any more, so it must be called."""

    __slots__ = ("calls",)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls = 0

    def process(self, key: Any, value: Any, timestamp: int) -> None:
        self.calls += 1
        self.forward(key, value, timestamp)


def test_pass_through_nodes_are_skipped_in_call_order() -> None:
    seen: list[tuple[str, Any]] = []
    a, b, c = _Sink("a", seen), _Sink("b", seen), _Sink("c", seen)
    inner = PassThroughProcessor("inner")
    inner.children = [b, c]
    outer = PassThroughProcessor("outer")
    outer.children = [a, inner]
    forward = fan_out([outer, c])
    forward("k", 1, 0)
    assert seen == [("a", "k"), ("b", "k"), ("c", "k"), ("c", "k")]  # as if each node were called
    assert fan_out([PassThroughProcessor("leaf")])("k", 1, 0) is None  # a pass-through without children drops
    assert fan_out([inner]) is not inner.process


def test_a_pass_through_subclass_that_overrides_process_is_called() -> None:
    seen: list[tuple[str, Any]] = []
    counting = _CountingPassThrough("counting")
    counting.children = [_Sink("a", seen)]
    counting.init(task=None)  # type: ignore[arg-type]
    fan_out([counting])("k", 1, 0)
    assert counting.calls == 1 and seen == [("a", "k")]


def test_a_plain_processor_is_not_assumed_to_pass_through() -> None:
    seen: list[tuple[str, Any]] = []
    plain = Processor("plain")
    plain.children = [_Sink("a", seen)]
    assert fan_out([plain]) == plain.process
