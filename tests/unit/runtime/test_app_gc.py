"""StreamApp.run sets the garbage collector's young-generation threshold (Config.gc_threshold)
for its duration and restores the interpreter's on the way out, also after a fatal error."""

from __future__ import annotations

import gc

import pytest

from streamproc.config import Config
from streamproc.runtime.app import StreamApp
from topologies import sessions


class _Boom(RuntimeError):
    pass


@pytest.mark.parametrize(("setting", "expected_during"), [(12_345, 12_345), (0, None)])
async def test_run_sets_and_restores_the_gc_threshold(monkeypatch: pytest.MonkeyPatch, setting: int,
                                                      expected_during: int | None) -> None:
    before = gc.get_threshold()
    app = StreamApp(sessions.build(), Config(application_id="gc-test", bootstrap_servers="127.0.0.1:1",
                                             gc_threshold=setting))
    seen: list[tuple[int, int, int]] = []

    async def failing_start() -> None:
        seen.append(gc.get_threshold())
        raise _Boom("start failed")

    monkeypatch.setattr(app, "start", failing_start)
    monkeypatch.setattr(app, "stop", lambda: None)
    with pytest.raises(_Boom):
        await app.run()
    assert seen == [(expected_during or before[0], *before[1:])]
    assert gc.get_threshold() == before
