"""Build of the compiled hot path (metadata is in pyproject.toml).

The modules listed in ``streamproc/_native.py`` are compiled with Cython from their unchanged Python
source; each is optional: without Cython or a C compiler the build goes on and that module runs
from source. The digest of every source compiled is written to ``streamproc/_native_build.json``,
which ``streamproc`` reads at import to never run a compiled module whose source has changed.

``python setup.py build_ext --inplace`` rebuilds in place (what ``bash scripts/setup.sh`` runs when
a source changed).
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
NATIVE = runpy.run_path(str(ROOT / "streamproc" / "_native.py"))
MODULES: tuple[str, ...] = NATIVE["MODULES"]


def _source(module: str) -> Path:
    return Path(NATIVE["source_path"](module, ROOT / "streamproc"))

DIRECTIVES = {
    "language_level": 3,
    "annotation_typing": False,  # annotations are documentation: the compiled code checks no types
    "binding": True,             # functions keep signatures and introspection
    "embedsignature": True,
}


def _extensions() -> list[Extension]:
    if os.environ.get("STREAMPROC_NO_COMPILE", "").strip() not in ("", "0"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("setup.py: Cython not available, streamproc runs from its Python source", file=sys.stderr)
        return []
    sources = [Extension(m, [str(_source(m).relative_to(ROOT))]) for m in MODULES]
    extensions: list[Extension] = cythonize(
        sources, compiler_directives=DIRECTIVES, build_dir="build/cython", quiet=True,
        nthreads=os.cpu_count() or 1)
    for ext in extensions:
        ext.optional = True  # a module that fails to compile runs from source
    return extensions


class BuildExt(build_ext):
    """build_ext in parallel; then records the source digest of each module that was built."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if self.parallel is None:  # type: ignore[has-type]
            self.parallel = os.cpu_count() or 1

    def run(self) -> None:
        super().run()
        record: dict[str, str] = {}
        for ext in self.extensions:
            built = Path(self.get_ext_fullpath(ext.name))
            if built.exists():
                record[ext.name] = NATIVE["module_digest"](ext.name, ROOT / "streamproc")
        out_dir = ROOT / "streamproc" if self.inplace else Path(self.build_lib) / "streamproc"
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / NATIVE["BUILD_RECORD"]).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
        print(f"setup.py: {len(record)}/{len(self.extensions)} modules compiled", file=sys.stderr)


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
