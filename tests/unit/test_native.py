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
JOB = "tests.unit.native_equivalence_job"  # run with ``python -m`` from the repository root
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
    record = {m: _native.module_digest(m, pkg) for m in mods}
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


def test_a_changed_layout_is_stale_and_modules_cimporting_a_source_module_run_from_source(tmp_path: Path) -> None:
    mods = ["streamproc.sub.base", "streamproc.sub.user", "streamproc.sub.other", "streamproc.top"]
    pkg = _fake_package(tmp_path, {m: f"X = {i!r}\n" for i, m in enumerate(mods)}, compiled=set(mods), record={})
    layouts = {"streamproc.sub.base": "cdef class Base:\n    cdef public object a\n",
               "streamproc.sub.user": "from .base cimport Base\ncdef class User(Base):\n    pass\n",
               "streamproc.top": "from .sub.user cimport User\n"}
    for module, text in layouts.items():
        _native.source_path(module, pkg).with_suffix(".pxd").write_text(text)
    assert _native.cimports("streamproc.sub.user", pkg) == ("streamproc.sub.base",)
    assert _native.cimports("streamproc.top", pkg) == ("streamproc.sub.user",)
    record = {m: _native.module_digest(m, pkg) for m in mods}
    (pkg / _native.BUILD_RECORD).write_text(json.dumps(record))
    assert set(_native.status(pkg, environ={}, modules=mods).values()) == {"compiled"}

    # a layout cimported by others changes: it and, transitively, everything compiled against it is stale
    _native.source_path("streamproc.sub.base", pkg).with_suffix(".pxd").write_text("cdef class Base:\n    pass\n")
    assert {m: why.endswith("(stale)") for m, why in _native.status(pkg, environ={}, modules=mods).items()} == {
        "streamproc.sub.base": True, "streamproc.sub.user": True, "streamproc.sub.other": False, "streamproc.top": True}

    # only the .py of the base changes: its dependents' digests hold, but they cannot load against a
    # Python class, so they run from source too
    _native.source_path("streamproc.sub.base", pkg).with_suffix(".pxd").write_text(layouts["streamproc.sub.base"])
    _native.source_path("streamproc.sub.base", pkg).write_text("X = 'edited'\n")
    assert _native.status(pkg, environ={}, modules=mods) == {
        "streamproc.sub.base": "source: source changed since it was compiled (stale)",
        "streamproc.sub.user": "source: it cimports streamproc.sub.base, which runs from source",
        "streamproc.sub.other": "compiled",
        "streamproc.top": "source: it cimports streamproc.sub.user, which runs from source",
    }


def test_a_stale_base_class_module_still_imports_and_runs(tmp_path: Path) -> None:
    """The real package with processors/base.py edited after the build: the processors compiled
    against its layout must not load (they run from source), and a topology still runs."""
    if _native.status()["streamproc.processors.base"] != "compiled":
        if IN_CI:
            pytest.fail("processors/base is not compiled in CI")
        pytest.skip("processors/base is not compiled here (outside CI; run bash scripts/setup.sh)")
    import shutil

    shutil.copytree(REPO / "streamproc", tmp_path / "streamproc")
    shutil.copytree(REPO / "topologies", tmp_path / "topologies")
    with (tmp_path / "streamproc" / "processors" / "base.py").open("a") as f:
        f.write("# edited after the build\n")
    code = ("from streamproc import _native, TopologyTestDriver\n"
            "from topologies import sessions\n"
            "import streamproc.processors.session_aggregate as m\n"
            "d = TopologyTestDriver(sessions.build(gap=10, grace=0))\n"
            "clicks = d.input_topic('clicks')\n"
            "for ts in (0, 5, 100): clicks.pipe('u', {}, ts)\n"
            "out = d.output_topic('session-stats').read_records()\n"
            "print(m.__file__.endswith('.py'), [r.value['clicks'] for r in out])\n")
    env = {k: v for k, v in os.environ.items() if k != _native.ENV_PURE}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "True [2]", out.stdout
    assert "streamproc.processors.base (and 3 modules that cimport them)" in out.stderr


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
        if IN_CI:
            pytest.fail(f"{_native.ENV_PURE} is set in CI: the compiled hot path is what CI must test")
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
    done = subprocess.run([sys.executable, "-m", JOB, str(seed), "2500"], env=env, cwd=REPO,
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


def test_tracebacks_through_compiled_frames_show_their_source_lines_from_any_directory(tmp_path: Path) -> None:
    """A compiled module's loader returns its ``.py`` source, so a traceback printed from a directory
    where the relative file names Cython records do not resolve still shows each compiled frame's
    line (and never another file of the same name, such as the standard library's)."""
    if _native.status()["streamproc.processors.source_sink"] != "compiled":
        if IN_CI:
            pytest.fail("processors/source_sink is not compiled in CI")
        pytest.skip("processors/source_sink is not compiled here (outside CI; run bash scripts/setup.sh)")
    code = ("import traceback\n"
            "from streamproc import StreamsBuilder, TopologyTestDriver\n"
            "b = StreamsBuilder()\n"
            "b.stream('in').map_values(lambda v: 1 // v).to('out')\n"
            "d = TopologyTestDriver(b.build())\n"
            "try:\n"
            "    d.input_topic('in').pipe('k', 0)\n"
            "except Exception:\n"
            "    traceback.print_exc()\n")
    env = {k: v for k, v in os.environ.items() if k not in (_native.ENV_PURE, "PYTHONPATH")}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=False, timeout=120)
    lines = out.stderr.splitlines()
    frame = next(i for i, line in enumerate(lines) if "SourceProcessor.receive" in line)
    assert 'File "streamproc/processors/source_sink.py"' in lines[frame], lines[frame]
    source = (REPO / "streamproc" / "processors" / "source_sink.py").read_text().splitlines()
    assert lines[frame + 1].strip() in {s.strip() for s in source if s.strip()}, lines[frame + 1]
    assert "self.forward(" in lines[frame + 1]
