"""``streamproc describe --format mermaid`` prints diagrams the real Mermaid parser accepts (the parser
GitHub's Markdown renders ``mermaid`` blocks with): every example topology and topologies with every
kind of node (tables, joins, branches, repartition topics, user processors, odd operator names)."""

from __future__ import annotations

import os

import pytest

from streamproc import (
    JoinWindows,
    KeyValueStoreBuilder,
    SessionWindows,
    StreamsBuilder,
    TimeWindows,
    UserProcessor,
)
from streamproc.cli import main
from tests.support import mermaid

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

pytestmark = pytest.mark.skipif(not IN_CI and not mermaid.available(),
                                reason="Mermaid not installed here (bash scripts/setup.sh installs it)")


class Passing(UserProcessor):
    def process(self, key, value, timestamp):  # type: ignore[no-untyped-def]
        self.context.forward(key, value)


def _everything() -> object:
    b = StreamsBuilder()
    b.add_state_store(KeyValueStoreBuilder("seen-ids"))
    clicks = b.stream("clicks", name="clicks.raw_v2")
    rates = b.table("rates", versioned=60_000)
    views = b.stream("views")
    branches = clicks.split(name="by-kind").branch(lambda k, v: v == "a", name="a").default_branch(name="rest")
    a = branches["by-kind-a"].map(lambda k, v: (v, k)).process(Passing, stores=["seen-ids"])
    a.join(rates, lambda v, r: (v, r), grace=1_000).to("joined")
    a.join(views, lambda x, y: (x, y), JoinWindows.of_time_difference_and_grace(10, 5)).to("pairs")
    (branches["by-kind-rest"].group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 0))
     .count().to_stream().to("sessions"))
    views.group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 0)).count().to_stream().to("counts")
    t = b.table("users").filter(lambda k, v: v is not None)
    t.group_by(lambda k, v: (v, 1)).count().to_stream().to("per-value")
    return b.build()


def _describe(spec: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["describe", spec, "--format", "mermaid", "--application-id", "app"]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("module", ["topologies.sessions", "topologies.wordcount", "topologies.currency",
                                    "topologies.pageviews", "topologies.dedup"])
def test_example_topologies_render(module: str, capsys: pytest.CaptureFixture[str]) -> None:
    ok, message = mermaid.parse(_describe(module, capsys))
    assert ok, message


def test_a_topology_with_every_kind_of_node_renders() -> None:
    diagram = _everything().describe("mermaid", application_id="app")  # type: ignore[attr-defined]
    ok, message = mermaid.parse(diagram)
    assert ok, f"{message}\n{diagram}"


def test_the_parser_rejects_a_broken_diagram() -> None:
    ok, message = mermaid.parse('flowchart TD\n  a[["x"] --> b\n')
    assert not ok and "Parse error" in message
