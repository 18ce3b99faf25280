"""Interactive queries: the daemon's stores read over HTTP (docs/queries.md).

A :class:`QueryServer` serves JSON on the daemon's own event loop (aiohttp; no threads). It asks a
:class:`QueryBackend` (the daemon) which instance owns which task and for the tasks active here::

    server = QueryServer(backend, host="127.0.0.1", port=0)   # port 0: an ephemeral port
    await server.start()                                      # server.port: the bound port
    ...
    await server.stop()

Endpoints:

- ``GET /v1/stores``: ``[{"name", "kind"}]``, every store of the topology by name; kind is
  ``key_value``, ``window``, ``session`` or ``versioned``.
- ``GET /v1/stores/{store}/keys/{key}``: window and session stores: ``{"key", "windows": [{"start",
  "end", "value"}]}`` by start (optional ``from``/``to``: inclusive bounds of the window starts; at
  most :data:`MAX_WINDOWS` windows, then ``"truncated": true``); key-value and versioned stores:
  ``{"key", "value", "timestamp"}`` (versioned: optional ``as_of``). Timestamps in epoch ms.
- ``GET /v1/metadata/{store}/{key}``: ``{"partition", "active", "standbys"}``.

``{key}`` is the key's text form, decoded by the store's key serde (:func:`decode_key`). Its
partition is the one producers choose (:func:`~streamproc.engine.partitioning.partition_for` of the
serialised key over the sub-topology's partition count). Answers: 200 from this instance's running
task; 404 (``{"error"}``) when that task has no value, or for an unknown store or path; 307 with
``Location: http://<active owner's application_server><same path and query>`` when another instance
is active for the partition; 503 (``{"error"}``, ``Retry-After``) while the partition restores here,
is unassigned, or the partition count is not known yet; 400 for a key the serde cannot decode or a
bad parameter; 500 (``{"error"}``, logged) for anything else: a handler never raises into the daemon.

Reads see the newest processed state of the in-memory store: effects of records processed but not
committed yet included (which, under exactly-once, a crash could roll back). Handlers are short
synchronous reads of one key, so a query never runs inside a ``Task.process`` call and never holds
up processing for longer than that read.
"""

from __future__ import annotations

import base64
import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from ..engine.partitioning import partition_for
from ..engine.task import Task, TaskId
from ..errors import SerializationError
from ..processors.window_aggregate import ValueAndTimestamp
from ..records import Windowed
from ..serde import Serde
from ..stores import VersionedRecord
from .assignor import TaskOwners
from .service import Service

__all__ = ["MAX_WINDOWS", "RETRY_AFTER_S", "SHUTDOWN_TIMEOUT_S", "BadKey", "QueryBackend", "QueryServer",
           "StoreInfo", "TaskOwners", "decode_key", "to_json"]

log = logging.getLogger(__name__)

#: The most windows (sessions) one key query returns; more are cut off with ``"truncated": true``.
MAX_WINDOWS = 10_000
#: ``Retry-After`` (seconds) of a 503 answer.
RETRY_AFTER_S = 1
#: How long :meth:`QueryServer.stop` waits for requests in flight before closing their connections (s).
SHUTDOWN_TIMEOUT_S = 2.0


class QueryBackend(Protocol):
    """What the daemon tells the query server."""

    @property
    def application_server(self) -> str:
        """This instance's advertised ``host:port``."""

    @property
    def topology(self) -> Any:
        """The running :class:`~streamproc.dsl.Topology`."""

    @property
    def application_id(self) -> str:
        """The application id (it names the internal topics the topology's stores use)."""

    def task_partitions(self, subtopology: int) -> int | None:
        """How many tasks (partitions) sub-topology ``subtopology`` has; None while unknown."""

    def owners(self, task: TaskId) -> TaskOwners:
        """The active and standby owners of ``task`` in the group's last assignment."""

    def local_task(self, task: TaskId) -> tuple[str, Task] | None:
        """``("running" | "restoring", task)`` when ``task`` is active on this instance, else None."""


@dataclass(frozen=True)
class StoreInfo:
    """A queryable store: its kind, serdes and the sub-topology whose tasks hold it."""

    name: str
    kind: str
    subtopology: int
    key_serde: Serde
    value_serde: Serde


class BadKey(ValueError):
    """A URL key or parameter the server cannot use (answered with 400 and this message)."""


# ---- keys ------------------------------------------------------------------------------------------

_INT_BITS = {"int": 64, "int32": 32}
_JSON_SERDES = ("json", "json-key", "json-or-bytes", "json-or-bytes-key")


def _json_text(text: str) -> bytes:
    """``text`` as JSON bytes: itself when it parses as JSON, else the JSON string of ``text``."""
    try:
        json.loads(text)
    except ValueError:
        return json.dumps(text, ensure_ascii=False).encode("utf-8")
    return text.encode("utf-8")


def decode_key(text: str, serde: Serde, store: str) -> tuple[Any, bytes]:
    """The store key written ``text`` in a URL, and its serialised bytes (what partitioning hashes).

    By serde: ``string``: the text; ``bytes``: its UTF-8 bytes; ``int``/``int32``: ``int(text)``
    (in range); ``float``: ``float(text)``; JSON serdes (``json``, ``json-key``, ``json-or-bytes``,
    ``json-or-bytes-key``): the text parsed as JSON, or the JSON string of the text when it is not
    valid JSON (``alice`` and ``"alice"`` are the same key; ``42`` is a number, ``"42"`` a string);
    any other serde: its ``deserialize`` of the text's UTF-8 bytes. A key the serde cannot decode,
    or a JSON object or array where keys must be hashable, raises :class:`BadKey` naming the
    key, the serde and what to do.
    """
    name = serde.name
    try:
        if name == "string":
            key: Any = text
        elif name == "bytes":
            key = text.encode("utf-8")
        elif name in _INT_BITS:
            key = int(text.strip())
            bits = _INT_BITS[name]
            if not -(1 << (bits - 1)) <= key < (1 << (bits - 1)):
                raise ValueError(f"{key} is outside the {bits}-bit signed range")
        elif name == "float":
            key = float(text)
        elif name in _JSON_SERDES:
            key = serde.deserialize(_json_text(text), f"store {store!r}")
        else:
            key = serde.deserialize(text.encode("utf-8"), f"store {store!r}")
        if isinstance(key, (dict, list)):
            raise TypeError(f"a JSON {'object' if isinstance(key, dict) else 'array'} is not a store key")
        hash(key)
        raw = serde.serialize(key, f"store {store!r}")
    except (ValueError, TypeError, SerializationError) as exc:
        raise BadKey(
            f"key {text!r} cannot be decoded by the {name} key serde of store {store!r}: {exc}; "
            f"write the key as {_key_hint(name)} (percent-encoded in the URL)") from None
    if raw is None:
        raise BadKey(f"key {text!r} of store {store!r} serialises to null with the {name} serde; "
                          f"a store key cannot be null")
    return key, raw


def _key_hint(serde_name: str) -> str:
    if serde_name in _INT_BITS:
        return f"a decimal integer (e.g. 42) in the {_INT_BITS[serde_name]}-bit signed range"
    if serde_name == "float":
        return "a decimal number (e.g. 1.5)"
    if serde_name.endswith("-key"):
        return "JSON text (a string, a number, or an array for a tuple key; bare text is taken as a string)"
    if serde_name in _JSON_SERDES:
        return "JSON text (a string or a number; bare text is taken as a string)"
    if serde_name in ("string", "bytes"):
        return "its text"
    return f"the text the {serde_name} serde decodes from UTF-8 bytes"


# ---- values ------------------------------------------------------------------------------------------

def to_json(value: Any) -> Any:
    """``value`` as JSON-compatible data: tuples become lists, ``bytes`` a UTF-8 string (or
    ``{"base64": ...}`` when not UTF-8), a :class:`~streamproc.records.Windowed` ``{"key", "start",
    "end"}``, non-string dict keys their JSON text, NaN and infinities their names as strings, and
    any other object its ``repr``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Windowed):
        return {"key": to_json(value.key), "start": value.start, "end": value.end}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k if isinstance(k, str) else json.dumps(to_json(k)): to_json(v) for k, v in value.items()}
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(raw).decode("ascii")}
    return repr(value)


def _plain(stored: Any) -> tuple[Any, int | None]:
    """``(value, timestamp)`` of a stored key-value or window value (aggregations and timestamped
    tables store :class:`ValueAndTimestamp`; other stores the value alone)."""
    if isinstance(stored, ValueAndTimestamp):
        return stored.value, stored.timestamp
    return stored, None


# ---- the server ------------------------------------------------------------------------------------

class _Answer(Exception):
    """An HTTP answer other than 200 (raised inside a handler, turned into a JSON response)."""

    def __init__(self, status: int, error: str, headers: Mapping[str, str] | None = None) -> None:
        super().__init__(error)
        self.status = status
        self.error = error
        self.headers = dict(headers or {})


def _int_param(request: web.Request, name: str) -> int | None:
    raw = request.query.get(name)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise _Answer(400, f"query parameter {name}={raw!r} is not an integer; give epoch milliseconds, "
                           f"e.g. {name}=1700000000000") from None


class QueryServer(Service):
    """The interactive-query HTTP server of one daemon instance (module docstring).

    ``backend``: the daemon (:class:`QueryBackend`); ``host``/``port``: where to listen (port 0: an
    ephemeral port, read :attr:`port` after :meth:`start`). Started and stopped as a
    :class:`~streamproc.runtime.service.Service` (label ``queries``).
    """

    label = "queries"

    def __init__(self, backend: QueryBackend, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__()
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise ValueError(f"query port must be an int in 0..65535 (0: ephemeral), got {port!r}")
        self.backend = backend
        self.host = host
        self.requested_port = port
        self._runner: web.AppRunner | None = None
        self._bound_port: int | None = None
        self._stores: dict[str, StoreInfo] | None = None
        #: requests answered, by status code (for tests and logs)
        self.answered: dict[int, int] = {}

    # ---- lifecycle ---------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The bound port (the requested one, or the ephemeral one given for port 0)."""
        if self._bound_port is None:
            raise RuntimeError("the query server is not started; call start() before reading its port")
        return self._bound_port

    def make_app(self) -> web.Application:
        """The aiohttp application (routes and the error middleware), unstarted."""
        app = web.Application(middlewares=[self._middleware])
        app.router.add_get("/v1/stores", self._list_stores)
        app.router.add_get("/v1/stores/{store}/keys/{key:.+}", self._get_key)
        app.router.add_get("/v1/metadata/{store}/{key:.+}", self._metadata)
        return app

    async def on_start(self) -> None:
        runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False,
                               shutdown_timeout=SHUTDOWN_TIMEOUT_S)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.host, self.requested_port, reuse_address=True)
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise OSError(exc.errno, f"interactive queries cannot listen on {self.host}:{self.requested_port}: "
                                     f"{exc.strerror or exc}; choose another query_port or query_host") from exc
        self._runner = runner
        addresses = runner.addresses
        self._bound_port = int(addresses[0][1]) if addresses else self.requested_port
        log.info("interactive queries on http://%s:%d/v1/stores (advertised as %s)", self.host, self._bound_port,
                 self.backend.application_server or "nothing")

    async def on_stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    # ---- topology -------------------------------------------------------------------------------

    def stores(self) -> dict[str, StoreInfo]:
        """Every store of the backend's topology by name (computed once)."""
        if self._stores is None:
            found: dict[str, StoreInfo] = {}
            for sub in self.backend.topology.subtopologies_for(self.backend.application_id):
                for spec in sub.stores:
                    found[spec.name] = StoreInfo(spec.name, spec.kind, sub.id, spec.key_serde, spec.value_serde)
            self._stores = found
        return self._stores

    def _store(self, name: str) -> StoreInfo:
        info = self.stores().get(name)
        if info is None:
            raise _Answer(404, f"no store {name!r} in this topology; its stores: {sorted(self.stores())}")
        return info

    def _locate(self, request: web.Request) -> tuple[StoreInfo, Any, TaskId]:
        """The store, decoded key and task of a ``{store}/{key}`` request."""
        info = self._store(request.match_info["store"])
        text = request.match_info["key"]
        try:
            key, raw = decode_key(text, info.key_serde, info.name)
        except BadKey as exc:
            raise _Answer(400, str(exc)) from None
        partitions = self.backend.task_partitions(info.subtopology)
        if partitions is None or partitions <= 0:
            raise _Answer(503, f"the partitions of store {info.name!r} (sub-topology {info.subtopology}) are not "
                               f"known yet: this instance has not joined the group; retry shortly",
                          {"Retry-After": str(RETRY_AFTER_S)})
        return info, key, TaskId(info.subtopology, partition_for(raw, partitions))

    # ---- handlers ---------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request,
                          handler: Callable[[web.Request], Any]) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except _Answer as answer:
            response = _json({"error": answer.error}, status=answer.status, headers=answer.headers)
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            error = f"{exc.reason}: {request.method} {request.path}"
            if exc.status == 404:
                error = (f"no such endpoint {request.path!r}; endpoints: GET /v1/stores, "
                         f"GET /v1/stores/{{store}}/keys/{{key}}, GET /v1/metadata/{{store}}/{{key}}")
            response = _json({"error": error}, status=exc.status)
        except Exception as exc:
            log.exception("interactive query %s failed", request.path_qs)
            response = _json(
                {"error": f"internal error answering {request.path_qs}: {type(exc).__name__}: {exc}"}, status=500)
        self.answered[response.status] = self.answered.get(response.status, 0) + 1
        return response

    async def _list_stores(self, request: web.Request) -> web.Response:
        return _json([{"name": s.name, "kind": s.kind} for _, s in sorted(self.stores().items())])

    async def _metadata(self, request: web.Request) -> web.Response:
        _, _, task = self._locate(request)
        owners = self.backend.owners(task)
        return _json({"partition": task.partition, "active": owners.active,
                                  "standbys": list(owners.standbys)})

    async def _get_key(self, request: web.Request) -> web.Response:
        info, key, task = self._locate(request)
        local = self.backend.local_task(task)
        if local is None:
            owners = self.backend.owners(task)
            if owners.active is not None and owners.active != self.backend.application_server:
                location = f"http://{owners.active}{request.raw_path}"
                return _json({"partition": task.partition, "active": owners.active, "location": location},
                             status=307, headers={"Location": location})
            why = ("is not assigned to any instance" if owners.active is None
                   else "is assigned to this instance but not started here yet")
            raise _Answer(503, f"partition {task.partition} of store {info.name!r} (task {task}) {why}; "
                               f"retry shortly", {"Retry-After": str(RETRY_AFTER_S)})
        state, local_task = local
        if state != "running":
            raise _Answer(503, f"partition {task.partition} of store {info.name!r} (task {task}) is {state} on "
                               f"this instance; retry shortly", {"Retry-After": str(RETRY_AFTER_S)})
        store = local_task.stores.get(info.name)
        if store is None:
            raise RuntimeError(f"task {task} has no store {info.name!r}; its stores: {sorted(local_task.stores)}")
        try:
            body = self._read(info, store, key, request)
        except TypeError as exc:  # a key of another type than the store's keys
            raise _Answer(400, f"key {to_json(key)!r} cannot be looked up in store {info.name!r}: {exc}") from None
        if body is None:
            raise _Answer(404, f"store {info.name!r} has no value for key {request.match_info['key']!r} "
                               f"(partition {task.partition})")
        return _json(body)

    def _read(self, info: StoreInfo, store: Any, key: Any, request: web.Request) -> dict[str, Any] | None:
        """The answer for ``key`` in ``store``, or None when it holds nothing for it."""
        if info.kind in ("window", "session"):
            lo = _int_param(request, "from")
            hi = _int_param(request, "to")
            if lo is not None and hi is not None and lo > hi:
                raise _Answer(400, f"from={lo} is after to={hi}; give from <= to (inclusive bounds of window starts)")
            windows = self._windows(info, store, key, lo, hi)
            if not windows:
                return None
            body: dict[str, Any] = {"key": to_json(key), "windows": windows[:MAX_WINDOWS]}
            if len(windows) > MAX_WINDOWS:
                body["truncated"] = True
            return body
        if info.kind == "versioned":
            as_of = _int_param(request, "as_of")
            record = store.get(key) if as_of is None else store.get(key, as_of)
            if record is None:
                return None
            if isinstance(record, VersionedRecord):
                return {"key": to_json(key), "value": to_json(record.value), "timestamp": record.timestamp}
            raise RuntimeError(f"versioned store {info.name!r} returned {type(record).__name__}, not a VersionedRecord")
        stored = store.get(key)
        if stored is None:
            return None
        value, timestamp = _plain(stored)
        return {"key": to_json(key), "value": to_json(value), "timestamp": timestamp}

    def _windows(self, info: StoreInfo, store: Any, key: Any, lo: int | None, hi: int | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if info.kind == "window":
            size = store.window_size
            with store.fetch(key, lo, hi) as it:
                for kv in it:
                    if len(out) > MAX_WINDOWS:
                        break
                    value, _ = _plain(kv.value)
                    out.append({"start": kv.key, "end": kv.key + size, "value": to_json(value)})
            return out
        with store.fetch(key) as it:
            sessions = [(kv.key.start, kv.key.end, kv.value) for kv in it
                        if (lo is None or kv.key.start >= lo) and (hi is None or kv.key.start <= hi)]
        sessions.sort(key=lambda s: (s[0], s[1]))
        return [{"start": s, "end": e, "value": to_json(v)} for s, e, v in sessions[:MAX_WINDOWS + 1]]


def _json(body: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON response (compact UTF-8)."""
    return web.json_response(body, status=status, headers=headers,
                             dumps=lambda b: json.dumps(b, ensure_ascii=False, separators=(",", ":")))
