"""A real broker started again on its port right after a stop: the port is in TIME_WAIT and is reused.

Stopping a broker closes its clients' connections from the broker's side first, so its port is
left in TIME_WAIT for up to a minute. ``localkafka start`` used to refuse such a port ("already
in use") although the broker (Java, ``SO_REUSEADDR``) binds it at once.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import time

import pytest

from tests.unit.test_localkafka_cli import TIME_WAIT, localkafka, plain_bind_error, tcp_states

pytestmark = pytest.mark.kafka


def _need_java_and_mvn() -> None:
    """As the Kafka fixtures do: outside CI a machine without java/mvn skips; in CI nothing skips."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing and os.environ.get("CI", "").lower() != "true":
        pytest.skip(f"a local broker needs {' and '.join(missing)} on PATH (not CI, so skipped)")


def test_a_broker_restarted_on_its_port_right_after_a_stop_starts() -> None:
    _need_java_and_mvn()
    port = localkafka.free_port()
    first = localkafka.start_single(port, timeout=180, quiet=True)
    try:
        # A client connected while the broker stops, as a streamproc daemon would be.
        client = socket.create_connection(("127.0.0.1", port), timeout=10)
    finally:
        first.stop(grace=10.0)
    with client:
        assert client.recv(1) == b""  # the broker closed the connection first
    deadline = time.monotonic() + 5
    while TIME_WAIT not in tcp_states(port):
        assert time.monotonic() < deadline, f"no TIME_WAIT on {port} after the stop: {tcp_states(port)}"
        time.sleep(0.05)
    # The condition the old check refused: a bind without SO_REUSEADDR fails.
    assert plain_bind_error(port) == errno.EADDRINUSE

    t0 = time.monotonic()
    second = localkafka.start_single(port, timeout=180, quiet=True)
    try:
        took = time.monotonic() - t0
        assert second.bootstrap == f"127.0.0.1:{port}"
        assert localkafka.metadata_brokers("127.0.0.1", port) == [1]
        print(f"restarted on {port} (TIME_WAIT) and ready in {took:.1f} s")
    finally:
        second.stop(grace=10.0)
