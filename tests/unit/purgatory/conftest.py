"""Event loops for the asyncio-driven purgatory tests: stock asyncio and uvloop, both instrumented to
count the loop handles the timer arms (so "one handle at a time" is checked, not assumed)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import uvloop


class HandleCounter:
    """Tracks handles created by call_at whose callback is a Timer's clock callback."""

    def __init__(self) -> None:
        self.records: list[list[Any]] = []  # [handle, ran]
        self.max_live = 0
        self.calls = 0

    def live(self) -> int:
        return sum(1 for h, ran in self.records if not ran[0] and not h.cancelled())

    def wrap(self, loop: Any, when: float, callback: Callable[..., Any], args: tuple, context: Any,
             call_at: Callable[..., Any]) -> Any:
        if getattr(callback, "__name__", "") != "_fire":
            return call_at(when, callback, *args, context=context)
        self.calls += 1
        ran = [False]

        def run(*a: Any) -> None:
            ran[0] = True
            callback(*a)

        handle = call_at(when, run, *args, context=context)
        self.records.append([handle, ran])
        self.max_live = max(self.max_live, self.live())
        return handle


class CountingAsyncioLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self.counter = HandleCounter()

    def call_at(self, when, callback, *args, context=None):  # type: ignore[override]
        return self.counter.wrap(self, when, callback, args, context, super().call_at)


class CountingUvloop(uvloop.Loop):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.counter = HandleCounter()

    def call_at(self, when, callback, *args, context=None):  # type: ignore[override]
        return self.counter.wrap(self, when, callback, args, context, super().call_at)


LOOPS = {"asyncio": CountingAsyncioLoop, "uvloop": CountingUvloop}


@pytest.fixture(params=sorted(LOOPS))
def run_on_loop(request: pytest.FixtureRequest) -> Callable[[Callable[[], Coroutine[Any, Any, Any]]], Any]:
    """Run ``main()`` to completion on a fresh instrumented loop of the parametrised kind."""
    factory = LOOPS[request.param]

    def run(main: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(main())

    return run
