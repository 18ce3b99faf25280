"""A small start/stop lifecycle with ordered children (the faust ``Service`` idea, minimal).

A :class:`Service` starts its children in declaration order, then itself (:meth:`on_start`), and
stops in the reverse order: itself first (:meth:`on_stop`), then its children last-to-first. A
child that failed to start stops every child started before it, so startup and shutdown are
correct by construction. ``start`` and ``stop`` are idempotent.

Background work is attached with :meth:`add_background`; those tasks are cancelled (and awaited)
when the service stops. A background task that raises reports the error through
:meth:`on_crash`, which by default stores it in :attr:`crash` for the owner to surface.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

__all__ = ["MIN_STOP_S", "Service"]

log = logging.getLogger(__name__)

#: The least time a child gets to stop when a deadline is already (nearly) past (s).
MIN_STOP_S = 0.2


class Service:
    """Base class of the daemon's long-lived components."""

    #: Human-readable name for logs.
    label: str = "service"

    def __init__(self) -> None:
        self._started = False
        self._stopped = False
        self._background: list[asyncio.Task[Any]] = []
        self.crash: BaseException | None = None

    # ---- to override -------------------------------------------------------------------------

    def children(self) -> Sequence[Service]:
        """Children, in start order (stopped in reverse)."""
        return ()

    async def on_start(self) -> None:
        """Start this service's own resources (after its children)."""

    async def on_stop(self) -> None:
        """Release this service's own resources (before its children stop)."""

    def on_crash(self, exc: BaseException) -> None:
        """A background task raised ``exc``."""
        if self.crash is None:
            self.crash = exc

    # ---- lifecycle -----------------------------------------------------------------------------

    @property
    def started(self) -> bool:
        return self._started and not self._stopped

    async def start(self) -> None:
        if self._started:
            return
        done: list[Service] = []
        try:
            for child in self.children():
                await child.start()
                done.append(child)
            await self.on_start()
        except BaseException:
            for child in reversed(done):
                try:
                    await child.stop()
                except Exception:  # already failing: log and go on
                    log.exception("while stopping %s after a failed start", child.label)
            raise
        self._started = True
        log.debug("%s started", self.label)

    def abort(self) -> None:
        """Give up at once on what :meth:`stop` was waiting for (its deadline passed): cancel the
        background tasks; subclasses also drop what their clients still hold."""
        for task in self._background:
            task.cancel()

    async def stop(self, deadline: float | None = None) -> None:
        """Stop this service, then its children last-to-first. With ``deadline`` (a
        ``time.monotonic()`` value) each child gets what is left of it (at least
        :data:`MIN_STOP_S`); a child that has not stopped by then is aborted (:meth:`abort`), logged,
        and the next one stops."""
        if not self._started or self._stopped:
            return
        self._stopped = True
        errors: list[BaseException] = []
        try:
            await self.on_stop()
        except Exception as exc:  # noqa: BLE001 - children must still stop
            errors.append(exc)
        await self._cancel_background()
        for child in reversed(list(self.children())):
            try:
                if deadline is None:
                    await child.stop()
                else:
                    await asyncio.wait_for(child.stop(deadline), max(MIN_STOP_S, deadline - time.monotonic()))
            except TimeoutError:
                log.warning("%s did not stop before the shutdown deadline; closed without waiting", child.label)
                child.abort()
            except Exception as exc:  # noqa: BLE001
                errors.append(exc)
        log.debug("%s stopped", self.label)
        if errors:
            raise errors[0]

    # ---- background tasks ------------------------------------------------------------------

    def add_background(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.label}:{name}")
        self._background.append(task)
        task.add_done_callback(self._background_done)
        return task

    def _background_done(self, task: asyncio.Task[Any]) -> None:
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("%s: background task %s failed: %r", self.label, task.get_name(), exc)
            self.on_crash(exc)

    async def _cancel_background(self) -> None:
        tasks, self._background = self._background, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001 - reported by _background_done
                pass
