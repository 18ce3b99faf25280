"""The modules of the per-record hot path that are compiled with Cython, and the way back to source.

``setup.py`` compiles every module in :data:`MODULES` (unchanged Python source, compiled with
``annotation_typing=False`` so it behaves exactly as the interpreted code) when a C compiler and
Cython are available, and records the SHA-256 of each source it compiled in
``streamproc/_native_build.json``. The extension modules sit next to their ``.py`` sources.

At ``import streamproc``, :func:`install` makes Python load the ``.py`` source instead of a
compiled module when

* ``STREAMPROC_PURE_PYTHON`` is set to a non-empty value other than ``0`` (benchmark baselines,
  debugging, profiling with py-spy, which sees no frames inside compiled code), or
* the compiled module is **stale**: its source changed since it was compiled, or it was not
  compiled by ``setup.py`` (not in the build record). A stale compiled module is never run; a
  warning names it and the command that rebuilds it (``bash scripts/setup.sh`` does it too), or
* a module it ``cimport``-s runs from source (below).

**Compiled layouts.** A module may have a ``.pxd`` file beside its ``.py`` that declares some of
its classes as extension types with C-level fields (``cdef public object ...``) and C-level methods
(``cpdef``): compiled, attribute reads and calls between them skip Python's attribute lookup; the
``.py`` stays the only implementation and runs unchanged without a compiler. The digest recorded
for a module covers its ``.py``, its ``.pxd`` and the ``.pxd`` of every module that ``.pxd``
``cimport``-s (their layouts are compiled into it), and a compiled module whose ``cimport``-ed module
runs from source runs from source too (it could not load against a Python class).

Without a compiler everything runs from source with the same results (the compiled code is the same
code). ``streamproc native`` prints which modules run compiled; ``--check`` exits 1 when any
module would run from source.

This module imports only the standard library (``setup.py`` reads it before anything is installed).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import logging
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

__all__ = ["BUILD_RECORD", "ENV_PURE", "MODULES", "cimports", "install", "module_digest", "status"]

#: Modules compiled by ``setup.py`` (dotted names): the code every record runs through.
MODULES: tuple[str, ...] = (
    "streamproc.serde",
    "streamproc.processors.base",
    "streamproc.processors.source_sink",
    "streamproc.processors.join_index",
    "streamproc.processors.serdes",
    "streamproc.processors.session_aggregate",
    "streamproc.processors.stateless",
    "streamproc.processors.stream_join",
    "streamproc.processors.table",
    "streamproc.processors.window_aggregate",
    "streamproc.stores._checks",
    "streamproc.stores.base",
    "streamproc.stores.changelog",
    "streamproc.stores.changelog_format",
    "streamproc.stores.iterators",
    "streamproc.stores.key_value",
    "streamproc.stores.session",
    "streamproc.stores.versioned",
    "streamproc.stores.window",
    "streamproc.runtime.acks",
    "streamproc.runtime.producer",
    "streamproc.runtime.partition_group",
    "streamproc.engine.task",
    "streamproc.engine.partitioning",
    "streamproc.purgatory.timer",
)

#: File (in the ``streamproc`` package) recording the digest of each compiled module's source.
BUILD_RECORD = "_native_build.json"
#: Environment variable: set (not ``0``) to run every module from its Python source.
ENV_PURE = "STREAMPROC_PURE_PYTHON"

_PACKAGE_DIR = Path(__file__).resolve().parent
_log = logging.getLogger("streamproc.native")
_installed: dict[str, str] = {}  # module -> why it runs from source ("" once install() ran: compiled)


_CIMPORT = re.compile(r"^\s*from\s+(\.+)([\w.]*)\s+cimport\b", re.MULTILINE)


def cimports(module: str, package_dir: Path = _PACKAGE_DIR) -> tuple[str, ...]:
    """The streamproc modules whose layouts ``module``'s ``.pxd`` cimports (relative imports)."""
    layout = source_path(module, package_dir).with_suffix(".pxd")
    if not layout.exists():
        return ()
    out = []
    for dots, name in _CIMPORT.findall(layout.read_text()):
        base = module.split(".")[: -len(dots)]
        out.append(".".join(base + ([name] if name else [])))
    return tuple(out)


def module_digest(module: str, package_dir: Path = _PACKAGE_DIR) -> str:
    """SHA-256 (hex) of what a module is compiled from: its ``.py``, its ``.pxd`` and the ``.pxd``
    files of the modules it cimports, transitively (a changed layout makes the module stale)."""
    digest = hashlib.sha256(source_path(module, package_dir).read_bytes())
    seen: set[str] = set()
    pending = [module]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        layout = source_path(current, package_dir).with_suffix(".pxd")
        if layout.exists():
            digest.update(f"\0{current}.pxd\0".encode())
            digest.update(layout.read_bytes())
            pending.extend(cimports(current, package_dir))
    return digest.hexdigest()


def source_path(module: str, package_dir: Path = _PACKAGE_DIR) -> Path:
    """The ``.py`` file of ``module`` (a dotted name under ``streamproc``)."""
    parts = module.split(".")
    if parts[0] != "streamproc":
        raise ValueError(f"not a streamproc module: {module!r}")
    return package_dir.joinpath(*parts[1:]).with_suffix(".py")


def compiled_path(module: str, package_dir: Path = _PACKAGE_DIR) -> Path | None:
    """The extension module file of ``module`` next to its source, or None when there is none."""
    source = source_path(module, package_dir)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_name(source.stem + suffix)
        if candidate.exists():
            return candidate
    return None


def pure_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``STREAMPROC_PURE_PYTHON`` asks for the Python source of every module."""
    value = (os.environ if environ is None else environ).get(ENV_PURE, "").strip()
    return value not in ("", "0")


def status(package_dir: Path = _PACKAGE_DIR, environ: Mapping[str, str] | None = None,
           modules: Sequence[str] = MODULES) -> dict[str, str]:
    """For each module: ``"compiled"`` or why it runs from source (``"source: ..."``)."""
    record_file = package_dir / BUILD_RECORD
    try:
        record = json.loads(record_file.read_text()) if record_file.exists() else {}
    except (OSError, ValueError) as exc:
        _log.warning("ignoring unreadable %s (%s): every module runs from source", record_file, exc)
        record = {}
    pure = pure_requested(environ)
    out: dict[str, str] = {}
    for module in modules:
        if compiled_path(module, package_dir) is None:
            out[module] = "source: not compiled"
        elif pure:
            out[module] = f"source: {ENV_PURE} is set"
        elif record.get(module) is None:
            out[module] = f"source: compiled module not recorded in {BUILD_RECORD} (stale)"
        elif record[module] != module_digest(module, package_dir):
            out[module] = "source: source changed since it was compiled (stale)"
        else:
            out[module] = "compiled"
    deps = {module: cimports(module, package_dir) for module in modules}
    changed = True
    while changed:  # a compiled module cannot load against a cimported module run from source
        changed = False
        for module in modules:
            if out[module] != "compiled":
                continue
            for dep in deps[module]:
                if out.get(dep, "compiled") != "compiled":
                    out[module] = f"source: it cimports {dep}, which runs from source"
                    changed = True
                    break
    return out


class _SourceFinder(importlib.abc.MetaPathFinder):
    """Finds the listed modules as their ``.py`` source (ahead of the compiled extension)."""

    def __init__(self, sources: dict[str, Path]) -> None:
        self.sources = sources

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        source = self.sources.get(fullname)
        if source is None:
            return None
        return importlib.util.spec_from_file_location(fullname, source)


class _CompiledWithSource(importlib.machinery.ExtensionFileLoader):
    """Loads a compiled module and, unlike the standard extension loader, returns its ``.py``
    source from ``get_source``: tracebacks through compiled frames then show the right source lines
    whatever the current directory (``linecache`` asks the module's loader)."""

    def __init__(self, fullname: str, path: str, source: Path) -> None:
        super().__init__(fullname, path)
        self.source = source

    def get_source(self, fullname: str) -> str | None:  # type: ignore[override]  # the base returns None only
        try:
            return self.source.read_text()
        except OSError:
            return None


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the listed compiled modules with :class:`_CompiledWithSource`."""

    def __init__(self, compiled: dict[str, tuple[Path, Path]]) -> None:
        self.compiled = compiled  # module -> (extension file, source file)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        entry = self.compiled.get(fullname)
        if entry is None:
            return None
        extension, source = entry
        loader = _CompiledWithSource(fullname, str(extension), source)
        return importlib.util.spec_from_file_location(fullname, extension, loader=loader)


def install() -> dict[str, str]:
    """Route the modules that must not run compiled to their source and the compiled ones to a
    loader that knows their source (idempotent; called by ``streamproc/__init__``). Returns
    :func:`status` as it was applied."""
    if _installed:
        return dict(_installed)
    current = status()
    sources = {m: source_path(m) for m, why in current.items() if why != "compiled"}
    stale = sorted(m for m, why in current.items() if why.endswith("(stale)"))
    if stale:
        dependents = sum(1 for why in current.values() if "cimports" in why)
        _log.warning("compiled modules out of date, running their Python source instead: %s%s "
                     "(rebuild: bash scripts/setup.sh, or python setup.py build_ext --inplace)",
                     ", ".join(stale), f" (and {dependents} modules that cimport them)" if dependents else "")
    if sources:
        sys.meta_path.insert(0, _SourceFinder(sources))
    compiled = {}
    for module, why in current.items():
        extension = compiled_path(module)
        if why == "compiled" and extension is not None:
            compiled[module] = (extension, source_path(module))
    if compiled:
        sys.meta_path.insert(0, _CompiledFinder(compiled))
    _installed.update(current)
    return dict(current)
