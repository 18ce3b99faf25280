"""Packaging: PySpark (about 300 MB) is an extra, needed only by ``streamproc reprocess``."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import requires
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]


def test_pyspark_is_only_an_extra() -> None:
    reqs = [Requirement(r) for r in requires("streamproc") or []]
    pyspark = [r for r in reqs if r.name == "pyspark"]
    assert pyspark, "the spark extra must name pyspark"
    assert all(r.marker is not None and "extra" in str(r.marker) for r in pyspark), pyspark
    assert any('extra == "spark"' in str(r.marker) for r in pyspark)


def test_reprocess_without_pyspark_exits_2_with_one_line(tmp_path: Path) -> None:
    """With PySpark hidden from the import system, `reprocess` says what to install, exit 2; the
    daemon's modules and the driver import without it."""
    code = (
        "import sys, importlib.abc\n"
        "class Hide(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyspark' or name.startswith('pyspark.'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Hide())\n"
        "import importlib.util\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n == 'pyspark' else real(n, *a)\n"
        "import streamproc.runtime.app, streamproc.cli\n"
        "from streamproc import TopologyTestDriver\n"
        "sys.exit(streamproc.cli.main(['reprocess', 'topologies.sessions', '--input', 'clicks=in.jsonl',\n"
        f"                               '--output', {str(tmp_path / 'out')!r}]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False,
                         timeout=120)
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "pip install 'streamproc[spark]'" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_the_example_topologies_are_not_installed_as_a_top_level_package() -> None:
    """``topologies`` is a name any user project may have: the examples stay in the repository (run
    them from its root, where ``streamproc run`` finds modules of the current directory)."""
    import tomllib

    find = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    assert find["include"] == ["streamproc*"]
