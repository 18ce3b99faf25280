"""The interactive-query server (streamproc/runtime/queries.py, docs/queries.md) on 127.0.0.1, an
ephemeral port, against a fake backend whose tasks are real engine Tasks fed through Task.process.

The answers are compared with the contents computed in the test from the input (sessions split by
the gap, counts, last versions) and with the TopologyTestDriver's final store for the same input.
"""

from __future__ import annotations

import collections
import re
import time
import urllib.parse
from collections.abc import AsyncIterator, Iterable
from typing import Any

import aiohttp
import pytest

from streamproc import serde
from streamproc.dsl import StreamsBuilder, TimeWindows, Topology
from streamproc.engine.partitioning import partition_for
from streamproc.engine.task import Task, TaskId
from streamproc.records import Record
from streamproc.runtime.queries import (
    MAX_WINDOWS,
    SHUTDOWN_TIMEOUT_S,
    BadKey,
    QueryServer,
    TaskOwners,
    decode_key,
    to_json,
)
from streamproc.testing import TopologyTestDriver
from topologies import currency, pageviews, sessions, wordcount

APP = "q"
HERE = "127.0.0.1:1"          # what the fake backend advertises as this instance
ELSEWHERE = "10.0.0.2:8080"    # the other instance of the group


class Cluster:
    """Every task of ``topology`` over ``partitions`` partitions, fed like the daemon feeds them:
    a record goes to the partition of its serialised key; what a task writes to a repartition topic
    goes on to the downstream task of the partition of its key bytes."""

    def __init__(self, topology: Topology, partitions: int) -> None:
        self.topology = topology
        self.partitions = partitions
        self.subs = topology.subtopologies_for(APP)
        self.tasks = {TaskId(s.id, p): Task(topology, s.id, p, APP) for s in self.subs for p in range(partitions)}
        self.readers = {t: s.id for s in self.subs for t in s.source_topics}
        self.offsets: collections.Counter[tuple[str, int]] = collections.Counter()

    def pipe(self, topic: str, key: Any, value: Any, ts: int) -> None:
        ks, vs = self.topology.source_serdes(topic, APP)
        kb = key if ks is None else ks.serialize(key)
        vb = value if vs is None else vs.serialize(value)
        self.deliver(topic, kb, vb, ts)

    def deliver(self, topic: str, key: bytes | None, value: Any, ts: int) -> None:
        p = partition_for(key, self.partitions)
        offset = self.offsets[(topic, p)]
        self.offsets[(topic, p)] += 1
        task = self.tasks[TaskId(self.readers[topic], p)]
        task.process(topic, p, [Record(key, value, ts, (), topic, p, offset)])
        task.drain_changelogs()
        for out in task.drain_outputs():
            if out.topic in self.readers:
                self.deliver(out.topic, out.key, out.value, out.timestamp)


class Backend:
    """A fake daemon: local tasks by state, the group's owners, the partition counts."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.local: dict[TaskId, tuple[str, Task]] = {t: ("running", task) for t, task in cluster.tasks.items()}
        self.assignment: dict[TaskId, TaskOwners] = {t: TaskOwners(HERE, (ELSEWHERE,)) for t in cluster.tasks}
        self.partitions: dict[int, int | None] = {s.id: cluster.partitions for s in cluster.subs}
        self.fail_owners = False

    @property
    def application_server(self) -> str:
        return HERE

    @property
    def topology(self) -> Topology:
        return self.cluster.topology

    @property
    def application_id(self) -> str:
        return APP

    def task_partitions(self, subtopology: int) -> int | None:
        return self.partitions.get(subtopology)

    def owners(self, task: TaskId) -> TaskOwners:
        if self.fail_owners:
            raise RuntimeError("assignment exploded")
        return self.assignment.get(task, TaskOwners(None, ()))

    def local_task(self, task: TaskId) -> tuple[str, Task] | None:
        return self.local.get(task)

    def move(self, task: TaskId, active: str | None, state: str | None = None) -> None:
        """Make ``task`` active elsewhere (state None) or here in ``state``; ``active`` as advertised."""
        self.assignment[task] = TaskOwners(active, (HERE,) if active != HERE else (ELSEWHERE,))
        if state is None:
            self.local.pop(task, None)
        else:
            self.local[task] = (state, self.cluster.tasks[task])


class Client:
    def __init__(self, session: aiohttp.ClientSession, port: int) -> None:
        self.session = session
        self.base = f"http://127.0.0.1:{port}"

    async def get(self, path: str, **params: Any) -> tuple[int, Any, Any]:
        """``(status, json body, headers)``; redirects are not followed."""
        async with self.session.get(self.base + path, params=params or None, allow_redirects=False) as r:
            return r.status, await r.json(), r.headers


def key_path(store: str, key: str, what: str = "keys") -> str:
    quoted = urllib.parse.quote(key, safe="")
    if what == "metadata":
        return f"/v1/metadata/{store}/{quoted}"
    return f"/v1/stores/{store}/keys/{quoted}"


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    """``await serve(backend)`` -> a :class:`Client` of a started server (stopped afterwards)."""
    servers: list[QueryServer] = []
    session = aiohttp.ClientSession()

    async def start(backend: Backend) -> Client:
        server = QueryServer(backend, "127.0.0.1", 0)
        await server.start()
        servers.append(server)
        return Client(session, server.port)

    yield start
    await session.close()
    for server in servers:
        await server.stop()


# ---- sessions (session store) -----------------------------------------------------------------------

GAP = 60_000


def expected_sessions(clicks: Iterable[tuple[str, int]], gap: int) -> dict[str, list[tuple[int, int, int]]]:
    """``{user: [(start, end, clicks)]}``: a user's clicks at most ``gap`` apart share a session."""
    by_user: dict[str, list[int]] = collections.defaultdict(list)
    for user, ts in clicks:
        by_user[user].append(ts)
    out: dict[str, list[tuple[int, int, int]]] = {}
    for user, times in by_user.items():
        times.sort()
        runs = [[times[0], times[0], 1]]
        for t in times[1:]:
            if t - runs[-1][1] <= gap:
                runs[-1][1] = t
                runs[-1][2] += 1
            else:
                runs.append([t, t, 1])
        out[user] = [tuple(r) for r in runs]  # type: ignore[misc]
    return out


def click_input() -> list[tuple[str, int]]:
    users = [f"user-{i}" for i in range(24)] + ["a/b c", "élodie"]
    clicks = []
    for i, user in enumerate(users):
        t = 1_000 * i
        for j in range(1 + i % 7):
            t += 20_000 if j % 2 else 90_000 + i  # some clicks within the gap, some past it
            clicks.append((user, t))
    clicks.sort(key=lambda c: c[1])
    return clicks


@pytest.fixture
def session_cluster() -> tuple[Cluster, list[tuple[str, int]]]:
    # a grace of an hour: nothing expires, so the store holds every session
    cluster = Cluster(sessions.build(gap=GAP, grace=3_600_000), partitions=4)
    clicks = click_input()
    for user, ts in clicks:
        cluster.pipe(sessions.INPUT, user, {"page": "/"}, ts)
    return cluster, clicks


async def test_session_store_answers_equal_the_sessions_of_the_input_and_the_drivers_store(
        serve: Any, session_cluster: tuple[Cluster, list[tuple[str, int]]]) -> None:
    cluster, clicks = session_cluster
    client = await serve(Backend(cluster))
    expected = expected_sessions(clicks, GAP)
    assert any(len(s) > 1 for s in expected.values()) and any(len(s) == 1 for s in expected.values())
    with TopologyTestDriver(cluster.topology, application_id=APP) as driver:
        for user, ts in clicks:
            driver.input_topic(sessions.INPUT).pipe(user, {"page": "/"}, ts)
        store = driver.session_store(sessions.STORE)
        for user, runs in expected.items():
            status, body, _ = await client.get(key_path(sessions.STORE, user))
            assert status == 200, body
            assert body == {"key": user, "windows": [{"start": s, "end": e, "value": n} for s, e, n in runs]}
            with store.fetch(user) as it:
                from_driver = sorted((kv.key.start, kv.key.end, kv.value) for kv in it)
            assert [(w["start"], w["end"], w["value"]) for w in body["windows"]] == from_driver


async def test_from_and_to_bound_the_window_starts_inclusively(
        serve: Any, session_cluster: tuple[Cluster, list[tuple[str, int]]]) -> None:
    cluster, clicks = session_cluster
    client = await serve(Backend(cluster))
    user, runs = max(expected_sessions(clicks, GAP).items(), key=lambda kv: len(kv[1]))
    assert len(runs) >= 3
    second = runs[1][0]
    status, body, _ = await client.get(key_path(sessions.STORE, user), **{"from": second, "to": second})
    assert status == 200 and [w["start"] for w in body["windows"]] == [second]
    status, body, _ = await client.get(key_path(sessions.STORE, user), **{"from": second})
    assert [w["start"] for w in body["windows"]] == [r[0] for r in runs[1:]]
    status, body, _ = await client.get(key_path(sessions.STORE, user), to=second - 1)
    assert [w["start"] for w in body["windows"]] == [runs[0][0]]
    status, body, _ = await client.get(key_path(sessions.STORE, user), **{"from": runs[-1][0] + 1})
    assert status == 404 and user in body["error"]
    status, body, _ = await client.get(key_path(sessions.STORE, user), **{"from": 5, "to": 4})
    assert status == 400 and "from=5 is after to=4" in body["error"]
    status, body, _ = await client.get(key_path(sessions.STORE, user), to="yesterday")
    assert status == 400 and "to='yesterday' is not an integer" in body["error"]


async def test_another_instances_partition_redirects_with_the_same_path_and_query(
        serve: Any, session_cluster: tuple[Cluster, list[tuple[str, int]]]) -> None:
    cluster, _ = session_cluster
    backend = Backend(cluster)
    client = await serve(backend)
    user = "a/b c"
    task = TaskId(0, partition_for(user.encode(), 4))
    backend.move(task, ELSEWHERE)
    path = key_path(sessions.STORE, user)
    status, body, headers = await client.get(path, **{"from": 0, "to": 99_999})
    assert status == 307, body
    assert headers["Location"] == f"http://{ELSEWHERE}/v1/stores/{sessions.STORE}/keys/a%2Fb%20c?from=0&to=99999"
    assert body == {"partition": task.partition, "active": ELSEWHERE, "location": headers["Location"]}
    status, body, _ = await client.get(key_path(sessions.STORE, user, "metadata"))
    assert (status, body) == (200, {"partition": task.partition, "active": ELSEWHERE, "standbys": [HERE]})
    # a partition of the same store on this instance is still answered here
    other = next(u for u in (f"user-{i}" for i in range(24)) if partition_for(u.encode(), 4) != task.partition)
    assert (await client.get(key_path(sessions.STORE, other)))[0] == 200


async def test_restoring_unassigned_and_unknown_partitions_answer_503_with_retry_after(
        serve: Any, session_cluster: tuple[Cluster, list[tuple[str, int]]]) -> None:
    cluster, _ = session_cluster
    backend = Backend(cluster)
    client = await serve(backend)
    user = "user-3"
    task = TaskId(0, partition_for(user.encode(), 4))
    backend.move(task, HERE, "restoring")
    status, body, headers = await client.get(key_path(sessions.STORE, user))
    assert status == 503 and "restoring on this instance" in body["error"] and headers["Retry-After"] == "1"
    backend.move(task, None)
    status, body, headers = await client.get(key_path(sessions.STORE, user))
    assert status == 503 and "not assigned to any instance" in body["error"] and headers["Retry-After"] == "1"
    status, body, _ = await client.get(key_path(sessions.STORE, user, "metadata"))
    assert (status, body) == (200, {"partition": task.partition, "active": None, "standbys": [HERE]})
    backend.move(task, HERE)          # the group says here, the task is not started here yet
    status, body, _ = await client.get(key_path(sessions.STORE, user))
    assert status == 503 and "not started here yet" in body["error"]
    backend.partitions[0] = None       # before the first assignment
    status, body, headers = await client.get(key_path(sessions.STORE, user))
    assert status == 503 and "not known yet" in body["error"] and headers["Retry-After"] == "1"


# ---- word count (key-value store, behind a repartition topic) ------------------------------------------

async def test_key_value_store_answers_equal_the_counts_of_the_input_and_the_drivers_store(serve: Any) -> None:
    cluster = Cluster(wordcount.build(), partitions=3)
    sentences = ["the quick brown fox", "The lazy dog", "don't stop the fox", "quick quick slow", "Ça va"]
    counts: collections.Counter[str] = collections.Counter()
    newest: dict[str, int] = {}
    with TopologyTestDriver(cluster.topology, application_id=APP) as driver:
        for i, sentence in enumerate(sentences):
            ts = 1_000 * (len(sentences) - i)   # out of order: the count's timestamp is the largest
            cluster.pipe(wordcount.INPUT, None, sentence, ts)
            driver.input_topic(wordcount.INPUT).pipe(None, sentence, ts)
            for word in wordcount.words(sentence):
                counts[word] += 1
                newest[word] = max(newest.get(word, ts), ts)
        store = driver.key_value_store(wordcount.STORE)
        client = await serve(Backend(cluster))
        assert {s for s in counts} >= {"ça", "don't"}
        for word, n in counts.items():
            status, body, _ = await client.get(key_path(wordcount.STORE, word))
            assert status == 200, body
            assert body == {"key": word, "value": n, "timestamp": newest[word]}
            assert (body["value"], body["timestamp"]) == tuple(store.get(word))
    status, body, _ = await client.get(key_path(wordcount.STORE, "absent"))
    assert status == 404 and "'word-counts-store' has no value for key 'absent'" in body["error"]


async def test_unknown_store_and_path_answer_404_naming_what_exists(serve: Any) -> None:
    client = await serve(Backend(Cluster(wordcount.build(), partitions=2)))
    status, body, _ = await client.get(key_path("word-count", "fox"))
    assert status == 404
    assert body["error"] == "no store 'word-count' in this topology; its stores: ['word-counts-store']"
    status, body, _ = await client.get(key_path("word-count", "fox", "metadata"))
    assert status == 404 and "'word-counts-store'" in body["error"]
    status, body, _ = await client.get("/v2/stores")
    assert status == 404 and "GET /v1/stores" in body["error"]


async def test_errors_answer_500_and_the_server_goes_on(serve: Any, caplog: pytest.LogCaptureFixture) -> None:
    cluster = Cluster(wordcount.build(), partitions=2)
    cluster.pipe(wordcount.INPUT, None, "fox", 1)
    backend = Backend(cluster)
    client = await serve(backend)
    backend.local.clear()
    backend.fail_owners = True
    status, body, _ = await client.get(key_path(wordcount.STORE, "fox"))
    assert status == 500 and "RuntimeError: assignment exploded" in body["error"]
    assert "interactive query /v1/stores/word-counts-store/keys/fox failed" in caplog.text
    backend.fail_owners = False
    backend.local = {t: ("running", task) for t, task in cluster.tasks.items()}
    assert (await client.get(key_path(wordcount.STORE, "fox")))[:2] == (200, {"key": "fox", "value": 1,
                                                                               "timestamp": 1})


# ---- a window aggregation (window store) --------------------------------------------------------------

async def test_window_store_answers_equal_the_per_minute_counts_of_the_input(serve: Any) -> None:
    minute = 60_000
    cluster = Cluster(pageviews.build(count_window=minute, count_grace=86_400_000), partitions=4)
    views = [(f"u{i % 7}", f"/page/{i % 5}", 7_000 * i) for i in range(200)]
    expected: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for user, page, ts in views:
        cluster.pipe(pageviews.VIEWS, user, {"page": page}, ts)
        expected[page][ts // minute * minute] += 1
    client = await serve(Backend(cluster))
    for page, per_start in expected.items():
        status, body, _ = await client.get(key_path(pageviews.COUNT_STORE, page))
        assert status == 200, body
        assert body == {"key": page, "windows": [{"start": s, "end": s + minute, "value": n}
                                                 for s, n in sorted(per_start.items())]}
        status, body, _ = await client.get(key_path(pageviews.COUNT_STORE, page), **{"from": 120_000, "to": 300_000})
        assert [w["start"] for w in body["windows"]] == [s for s in sorted(per_start) if 120_000 <= s <= 300_000]
    status, body, _ = await client.get("/v1/stores")
    assert status == 200
    kinds = {s["name"]: s["kind"] for s in body}
    assert kinds[pageviews.COUNT_STORE] == "window"
    assert kinds[f"{pageviews.COUNT_STORE}-progress"] == "key_value"
    assert [s["name"] for s in body] == sorted(kinds)


async def test_a_window_query_returns_at_most_max_windows(serve: Any) -> None:
    b = StreamsBuilder()
    (b.stream("in", key_serde=serde.STRING, value_serde=serde.JSON).group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(1, 10**9)).count(name="per-ms"))
    cluster = Cluster(b.build(), partitions=1)
    task = cluster.tasks[TaskId(0, 0)]
    task.process("in", 0, [Record(b"k", b"1", ts, (), "in", 0, ts) for ts in range(MAX_WINDOWS + 5)])
    client = await serve(Backend(cluster))
    status, body, _ = await client.get(key_path("per-ms", "k"))
    assert status == 200 and body["truncated"] is True
    assert [w["start"] for w in body["windows"]] == list(range(MAX_WINDOWS))


# ---- a versioned table -------------------------------------------------------------------------------

async def test_versioned_store_answers_the_newest_version_and_as_of(serve: Any) -> None:
    cluster = Cluster(currency.build(), partitions=3)
    rates = [("USD", 0.90, 1_000), ("USD", 0.92, 5_000), ("GBP", 1.15, 2_000), ("USD", 0.91, 3_000),
             ("JPY", 0.006, 1_500), ("JPY", None, 4_000), ("CHF", 1.04, 2_500)]
    for code, rate, ts in rates:
        cluster.pipe(currency.RATES, code, rate, ts)
    client = await serve(Backend(cluster))

    def valid_at(code: str, as_of: int | None) -> tuple[Any, int] | None:
        versions = sorted((ts, rate) for c, rate, ts in rates if c == code and (as_of is None or ts <= as_of))
        return None if not versions or versions[-1][1] is None else (versions[-1][1], versions[-1][0])

    for code in ("USD", "GBP", "JPY", "CHF"):
        for as_of in (None, 999, 1_000, 2_999, 3_500, 4_500, 10_000):
            params = {} if as_of is None else {"as_of": as_of}
            status, body, _ = await client.get(key_path("rates", code), **params)
            want = valid_at(code, as_of)
            if want is None:
                assert status == 404, (code, as_of, body)
            else:
                assert (status, body) == (200, {"key": code, "value": want[0], "timestamp": want[1]}), (code, as_of)
    status, body, _ = await client.get(key_path("rates", "USD"), as_of="now")
    assert status == 400 and "as_of='now'" in body["error"]


# ---- keys --------------------------------------------------------------------------------------------

async def test_a_key_the_serde_cannot_decode_answers_400_naming_key_serde_and_what_to_do(serve: Any) -> None:
    b = StreamsBuilder()
    b.table("accounts", name="accounts", key_serde=serde.INT, value_serde=serde.JSON)
    cluster = Cluster(b.build(), partitions=2)
    cluster.pipe("accounts", 42, {"owner": "ann", "tags": ("a", "b")}, 7)
    client = await serve(Backend(cluster))
    assert (await client.get(key_path("accounts", "42")))[:2] == (
        200, {"key": 42, "value": {"owner": "ann", "tags": ["a", "b"]}, "timestamp": None})
    status, body, _ = await client.get(key_path("accounts", "forty-two"))
    assert status == 400
    assert body["error"].startswith("key 'forty-two' cannot be decoded by the int key serde of store 'accounts'")
    assert "write the key as a decimal integer" in body["error"]
    status, body, _ = await client.get(key_path("accounts", "forty-two", "metadata"))
    assert status == 400


def test_decode_key_follows_each_serde() -> None:
    from streamproc.processors.serdes import JSON_OR_BYTES, JSON_OR_BYTES_KEY

    assert decode_key("alice", serde.STRING, "s") == ("alice", b"alice")
    assert decode_key("alice", serde.BYTES, "s") == (b"alice", b"alice")
    assert decode_key("-7", serde.INT, "s") == (-7, (-7).to_bytes(8, "big", signed=True))
    assert decode_key("7", serde.INT32, "s") == (7, (7).to_bytes(4, "big", signed=True))
    assert decode_key("1.5", serde.FLOAT, "s")[0] == 1.5
    assert decode_key("42", serde.JSON, "s") == (42, b"42")
    assert decode_key('"42"', serde.JSON, "s") == ("42", b'"42"')
    assert decode_key("alice", serde.JSON, "s") == ("alice", b'"alice"')
    assert decode_key('"alice"', serde.JSON, "s") == ("alice", b'"alice"')
    assert decode_key('["a", 1]', serde.JSON_KEY, "s") == (("a", 1), b'["a",1]')
    assert decode_key('["a", 1]', JSON_OR_BYTES_KEY, "s") == (("a", 1), b'["a",1]')
    assert decode_key("a b", JSON_OR_BYTES, "s") == ("a b", b'"a b"')
    for text, serde_, why in [("x", serde.INT, "invalid literal"), (str(2**31), serde.INT32, "32-bit signed range"),
                              ("1.5", serde.INT, "invalid literal"), ('{"a": 1}', serde.JSON, "JSON object"),
                              ("[1]", serde.JSON, "JSON array"), ("nan?", serde.FLOAT, "could not convert")]:
        with pytest.raises(BadKey, match=re.escape(f"key {text!r} cannot be decoded by the {serde_.name} key serde "
                                                   f"of store 's'")):
            decode_key(text, serde_, "s")
        try:
            decode_key(text, serde_, "s")
        except BadKey as exc:
            assert why in str(exc)


def test_values_render_as_json() -> None:
    from streamproc.records import Windowed

    assert to_json({"a": (1, 2), 3: b"x", "w": Windowed("k", 1, 2)}) == {
        "a": [1, 2], "3": "x", "w": {"key": "k", "start": 1, "end": 2}}
    assert to_json(b"\xff\x00") == {"base64": "/wA="}
    assert to_json(float("nan")) == "nan"
    assert to_json({("a", 1): 2}) == {'["a", 1]': 2}
    assert to_json(object).startswith("<class")


async def test_port_is_the_bound_ephemeral_port_and_stop_releases_it() -> None:
    backend = Backend(Cluster(wordcount.build(), partitions=1))
    server = QueryServer(backend, "127.0.0.1", 0)
    with pytest.raises(RuntimeError, match="not started"):
        server.port  # noqa: B018
    await server.start()
    port = server.port
    assert port > 0
    async with aiohttp.ClientSession() as session:     # a keep-alive connection is open when it stops
        async with session.get(f"http://127.0.0.1:{port}/v1/stores") as r:
            assert r.status == 200
        taken = QueryServer(backend, "127.0.0.1", port)
        with pytest.raises(OSError, match=f"interactive queries cannot listen on 127.0.0.1:{port}"):
            await taken.start()
        t0 = time.monotonic()
        await server.stop()
        # bounded by our SHUTDOWN_TIMEOUT_S, not aiohttp's default 60 s (the margin absorbs a loaded machine)
        assert time.monotonic() - t0 < SHUTDOWN_TIMEOUT_S + 20
    again = QueryServer(backend, "127.0.0.1", port)
    await again.start()
    assert again.port == port
    await again.stop()
    with pytest.raises(ValueError, match="query port must be an int in 0..65535"):
        QueryServer(backend, "127.0.0.1", 70_000)
