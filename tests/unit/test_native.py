"""The compiled hot path (streamproc/_native.py, setup.py): which modules run compiled, stale
detection, and equality of results with the Python source."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamproc import _native
from streamproc.cli import main as cli_main

REPO = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("native_equivalence_job.py")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _fake_package(tmp_path: Path, sources: dict[str, str], compiled: set[str], record: dict[str, str]) -> Path:
    pkg = tmp_path / "streamproc"
    for module, text in sources.items():
        path = _native.source_path(module, pkg)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if module in compiled:
            path.with_name(path.stem + SUFFIX).write_bytes(b"not really an extension")
    (pkg / _native.BUILD_RECORD).write_text(json.dumps(record))
    return pkg


def test_status_runs_a_compiled_module_only_when_its_recorded_source_is_unchanged(tmp_path: Path) -> None:
    mods = ["streamproc.a", "streamproc.sub.b", "streamproc.c", "streamproc.d"]
    pkg = _fake_package(tmp_path, {m: f"X = {i!r}\n" for i, m in enumerate(mods)},
                        compiled={"streamproc.a", "streamproc.sub.b", "streamproc.c"}, record={})
    record = {m: _native.source_digest(_native.source_path(m, pkg)) for m in mods}
    del record["streamproc.c"]  # compiled, but not by setup.py
    (pkg / _native.BUILD_RECORD).write_text(json.dumps(record))
    _native.source_path("streamproc.sub.b", pkg).write_text("X = 'edited'\n")

    got = _native.status(pkg, environ={}, modules=mods)
    assert got == {
        "streamproc.a": "compiled",
        "streamproc.sub.b": "source: source changed since it was compiled (stale)",
        "streamproc.c": f"source: compiled module not recorded in {_native.BUILD_RECORD} (stale)",
        "streamproc.d": "source: not compiled",
    }
    pure = _native.status(pkg, environ={_native.ENV_PURE: "1"}, modules=mods)
    assert pure["streamproc.a"] == f"source: {_native.ENV_PURE} is set"
    assert _native.status(pkg, environ={_native.ENV_PURE: "0"}, modules=mods)["streamproc.a"] == "compiled"


def test_an_unreadable_build_record_means_source_everywhere(tmp_path: Path) -> None:
    pkg = _fake_package(tmp_path, {"streamproc.a": "X = 1\n"}, compiled={"streamproc.a"}, record={})
    (pkg / _native.BUILD_RECORD).write_text("{not json")
    assert _native.status(pkg, environ={}, modules=["streamproc.a"])["streamproc.a"].endswith("(stale)")


def test_source_path_rejects_other_packages() -> None:
    with pytest.raises(ValueError, match="not a streamproc module: 'os.path'"):
        _native.source_path("os.path")


def test_every_listed_module_exists_and_setup_compiles_the_same_list() -> None:
    for module in _native.MODULES:
        assert _native.source_path(module).exists(), module
    assert "NATIVE[\"MODULES\"]" in (REPO / "setup.py").read_text()


def test_loaded_modules_follow_the_status() -> None:
    for module, why in _native.install().items():
        loaded = sys.modules.get(module) or __import__(module, fromlist=["_"])
        assert (Path(loaded.__file__).suffix == ".py") == (why != "compiled"), (module, why, loaded.__file__)


def test_in_ci_every_hot_path_module_runs_compiled() -> None:
    """CI installs with Cython and gcc: a build that silently fell back to source fails here."""
    if not IN_CI and any(why != "compiled" for why in _native.status().values()):
        pytest.skip("hot path not compiled on this machine (outside CI; run bash scripts/setup.sh)")
    if _native.pure_requested():
        pytest.skip(f"{_native.ENV_PURE} is set: the source is what is asked for")
    assert {m: why for m, why in _native.status().items() if why != "compiled"} == {}


def test_cli_native_lists_modules_and_checks(capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["native", "--check"])
    out = capsys.readouterr().out
    assert "streamproc.processors.session_aggregate" in out and "hot-path modules compiled" in out
    all_compiled = all(why == "compiled" for why in _native.status().values())
    assert rc == (0 if all_compiled else 1)


def _job(seed: int, pure: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != _native.ENV_PURE}
    if pure:
        env[_native.ENV_PURE] = "1"
    done = subprocess.run([sys.executable, str(JOB), str(seed), "2500"], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("seed", [1, 2])
def test_compiled_and_source_give_identical_outputs_changelogs_and_metrics(seed: int) -> None:
    compiled, source = _job(seed, pure=False), _job(seed, pure=True)
    assert all(why.startswith("source") for why in source.pop("status").values())
    status = compiled.pop("status")
    if IN_CI:
        assert set(status.values()) == {"compiled"}
    assert compiled == source
    assert compiled["sessions ON_WINDOW_CLOSE"]["topic session-stats"][0] > 100  # the runs did work
    assert compiled["currency"]["topic payments-eur"][0] > 100
