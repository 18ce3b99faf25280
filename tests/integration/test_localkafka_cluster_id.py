"""The local Kafka's cluster ids: never an id a command line reads as an option.

A KRaft cluster id is 16 random bytes in unpadded URL-safe base64; about one draw in 64 begins
with ``-``. The generator draws again then, and the storage tool gets the id glued to its option,
so even such an id formats (checked here with the real storage tool and a real broker start).
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from tests.support.kafka import localkafka, start_or_fail

DASH_FIRST = b"\xf8" + bytes(range(1, 16))  # encodes to "-AECAwQF...": begins with '-'


def test_generator_draws_again_for_an_id_that_begins_with_a_dash() -> None:
    draws = iter([DASH_FIRST, bytes(16), bytes(15) + b"\x01", b"\x00" + bytes(range(1, 16))])
    cluster_id = localkafka.new_cluster_id(lambda: next(draws))
    assert cluster_id == base64.urlsafe_b64encode(b"\x00" + bytes(range(1, 16))).decode().rstrip("=")
    assert next(draws, None) is None  # all four drawn: three refused, the fourth kept


def test_generator_over_many_draws() -> None:
    ids = [localkafka.new_cluster_id() for _ in range(20_000)]
    assert not [i for i in ids if i.startswith("-")]
    assert all(len(i) == 22 and base64.urlsafe_b64decode(i + "==") for i in ids)
    assert len(set(ids)) == len(ids)
    # the raw draws do begin with '-' about once in 64: the redraw is what keeps them out
    raw = [base64.urlsafe_b64encode(os.urandom(16)).decode() for _ in range(20_000)]
    assert sum(r.startswith("-") for r in raw) > 100


def test_format_command_glues_every_value_to_its_option(tmp_path: Path) -> None:
    node = localkafka.Node(1, 1, 2, tmp_path / "node-1")
    cmd = localkafka.format_command(tmp_path, node, "-dashFirstId0000000000")
    tail = cmd[cmd.index(localkafka.STORAGE_TOOL_CLASS) + 1 :]
    assert tail == ["format", "--cluster-id=-dashFirstId0000000000", f"--config={node.config_file}",
                    "--ignore-formatted"]  # fmt: skip
    assert not [arg for arg in tail if arg.startswith("-") and not arg.startswith("--")]


@pytest.mark.kafka
def test_a_broker_formatted_with_an_id_that_begins_with_a_dash_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The formatting path itself, forced to the id chance gives one start in 64."""
    forced = base64.urlsafe_b64encode(DASH_FIRST).decode().rstrip("=")
    assert forced.startswith("-")
    monkeypatch.setattr(localkafka, "new_cluster_id", lambda: forced)
    handle = start_or_fail("a local broker with a '-' cluster id", lambda: localkafka.start_single(timeout=180))
    try:
        meta = Path(handle.nodes[0].directory / "data" / "meta.properties").read_text()
        assert f"cluster.id={forced}" in meta.splitlines()
        host, _, port = handle.bootstrap.partition(":")
        assert localkafka.metadata_brokers(host, int(port))
    finally:
        handle.stop(grace=5.0)

