"""The package's layering, read from its source (docs/architecture.md).

Every ``import`` counts: at module level, inside functions and under ``TYPE_CHECKING``. A module
may import its own package and the layers below it, never a layer above or a sibling package of its
own layer; there is no import circle anywhere; modules use each other's public names only.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "streamproc"

#: Layer of each top-level module or sub-package of streamproc, lowest first (docs/architecture.md).
LAYERS: dict[str, int] = {
    "records": 0, "serde": 0, "time": 0, "errors": 0, "config": 0, "topic_config": 0, "_native": 0,
    "stores": 1, "purgatory": 1,
    "processors": 2,
    "dsl": 3,
    "engine": 4, "processor": 4,  # processor: the public home of the Processor API
    "testing": 5,  # the public home of the TopologyTestDriver
    "runtime": 6, "spark": 6,
    "cli": 7,
}
#: Modules of the base layer may import one another (without circles); other sibling parts may not.
BASE_LAYER = 0
#: At most this many accesses of another module's private names per 1,000 lines.
MAX_PRIVATE_PER_1000_LINES = 1.0


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ("streamproc", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The streamproc modules ``module`` imports (``from pkg import name`` counts ``pkg.name`` when
    that is a module, else ``pkg``)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in known else target)
    return {m for m in found if m in known and m != module}


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {m: _imports(m, p, known) for m, p in known.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def _part(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_no_import_circle_in_the_package() -> None:
    assert _cycles(_graph()) == []


def test_the_cycle_finder_sees_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_part_of_the_package_has_a_layer() -> None:
    parts = {_part(m) for m in _modules()} - {None}
    assert sorted(parts - set(LAYERS)) == []


def test_imports_go_down_the_layers_only() -> None:
    wrong = []
    for module, targets in _graph().items():
        part = _part(module)
        if part is None:  # the package's __init__: the public API, re-exports every layer
            continue
        for target in targets:
            other = _part(target)
            if other is None:
                wrong.append(f"{module} imports the package itself")
            elif other != part and (LAYERS[other] > LAYERS[part]
                                    or (LAYERS[other] == LAYERS[part] and LAYERS[part] != BASE_LAYER)):
                wrong.append(f"{module} (layer {LAYERS[part]}) imports {target} (layer {LAYERS[other]})")
    assert sorted(wrong) == []


def _private_accesses(path: Path, root: Path = PACKAGE.parent) -> list[str]:
    """``x._name`` (x not self/cls) and ``from m import _name`` where ``_name`` is not defined in
    this module: uses of another module's private names."""
    tree = ast.parse(path.read_text())
    defined: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            defined.add(node.value)  # __slots__ entries
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if node.attr not in defined:
                found.append(f"{path.relative_to(root)}:{node.lineno} {ast.unparse(node)}")
        elif isinstance(node, ast.ImportFrom):
            found.extend(f"{path.relative_to(root)}:{node.lineno} import {alias.name}"
                         for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__"))
    return found


def test_modules_use_each_other_through_public_names() -> None:
    paths = list(_modules().values())
    lines = sum(len(p.read_text().splitlines()) for p in paths)
    accesses = [a for p in paths for a in _private_accesses(p)]
    assert len(accesses) * 1000 / lines <= MAX_PRIVATE_PER_1000_LINES, "\n".join(accesses)


def test_the_private_access_finder_sees_a_reach_in(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("class A:\n    def f(self, other):\n        self._x = 1\n        return other._x + other._y\n")
    assert [a.split(" ", 1)[1] for a in _private_accesses(source, tmp_path)] == ["other._y"]
