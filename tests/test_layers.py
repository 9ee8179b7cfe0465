"""The tree keeps the architecture: data flows one way and packages are entered by their front door.

Layers, lowest first (README, "Layout"): the base plumbing; the spec; the rules; the protocol apps;
the single-switch core and its IR; network, delivery and incremental compiles; the backends; the
runtime; the command line (``p4sub``). A module may import its own layer or one below, never one
above; no two modules import each other, directly or around a longer cycle; and a module outside a
package that has a front door (an ``__init__`` with ``__all__``) imports only the names in that
``__all__`` (which may name public submodules). Imports inside functions count, and so do
``importlib.import_module`` calls whose module is a literal or an f-string with a literal head.
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("grammar", "compiler", "apps", "backends", "runtime", "p4sub")

#: (layer, module prefixes); the longest prefix decides. ``compiler`` itself holds only the version.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("grammar", "compiler.base")),
    ("spec", ("compiler.spec",)),
    ("rules", ("compiler.rules",)),
    ("apps", ("apps",)),
    ("core", ("compiler",)),
    ("network", ("compiler.network", "compiler.delivery", "compiler.incremental", "compiler.pleroma")),
    ("backends", ("backends",)),
    ("runtime", ("runtime",)),
    ("cli", ("p4sub",)),
)
#: ``compiler/__init__.py`` holds the version only; the base layer reads it.
BASE_MODULES = frozenset({"compiler"})


@dataclasses.dataclass(frozen=True)
class Edge:
    """``importer`` imports ``names`` from module ``target`` (no names: the module itself)."""

    importer: str
    target: str
    names: tuple[str, ...]
    line: int


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the project's packages under ``root``."""
    found = {}
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            found[module_name(root, path)] = path
    return found


def _literal_head(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value).rstrip(".")
    return None


def edges(root: Path) -> list[Edge]:
    """Every import between the project's modules under ``root``."""
    known = modules(root)
    out = []
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                out += [Edge(name, a.name, (), node.lineno) for a in node.names if a.name.split(".")[0] in ROOTS]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                if base.split(".")[0] not in ROOTS:
                    continue
                plain = tuple(a.name for a in node.names if f"{base}.{a.name}" not in known)
                out += [Edge(name, f"{base}.{a.name}", (), node.lineno) for a in node.names
                        if f"{base}.{a.name}" in known]
                if plain:
                    out.append(Edge(name, base, plain, node.lineno))
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module" and node.args):
                head = _literal_head(node.args[0])
                if head and head.split(".")[0] in ROOTS:
                    out.append(Edge(name, head, (), node.lineno))
    return out


def layer_of(module: str) -> int:
    if module in BASE_MODULES:
        return 0
    best, rank = "", -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best, rank = p, i
    assert rank >= 0, f"{module} is in no layer"
    return rank


def upward(found: list[Edge]) -> list[str]:
    return [f"{e.importer} (line {e.line}) imports {e.target}: {LAYERS[layer_of(e.importer)][0]} -> "
            f"{LAYERS[layer_of(e.target)][0]}" for e in found if layer_of(e.target) > layer_of(e.importer)]


def cycles(found: list[Edge], known: dict[str, Path]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {m: set() for m in known}
    for e in found:
        target = e.target if e.target in known else e.target.rpartition(".")[0]
        if target in known and target != e.importer:
            graph[e.importer].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def front_doors(root: Path, known: dict[str, Path]) -> dict[str, frozenset[str]]:
    """Packages whose ``__init__`` declares ``__all__``: their public names."""
    doors = {}
    for name, path in known.items():
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                doors[name] = frozenset(ast.literal_eval(node.value))
    return doors


def back_doors(found: list[Edge], known: dict[str, Path], doors: dict[str, frozenset[str]]) -> list[str]:
    """Imports from outside a front-door package of anything it does not list in ``__all__``."""
    bad = []
    for e in found:
        for package, public in doors.items():
            if e.importer == package or e.importer.startswith(package + "."):
                continue
            if e.target == package:
                bad += [f"{e.importer} (line {e.line}) imports {n} from {package}, not in its __all__"
                        for n in e.names if n not in public]
            elif e.target.startswith(package + "."):
                sub = e.target[len(package) + 1:].split(".")[0]
                nested = f"{package}.{sub}"
                if sub not in public and not (nested in doors and e.target.startswith(nested)):
                    bad.append(f"{e.importer} (line {e.line}) imports {e.target}, inside {package}: use its "
                               "__all__")
    return sorted(set(bad))


def violations(root: Path) -> dict[str, list]:
    known = modules(root)
    found = edges(root)
    return {"upward": upward(found), "cycles": cycles(found, known),
            "back doors": back_doors(found, known, front_doors(root, known))}


def test_the_tree_keeps_its_layers() -> None:
    found = violations(REPO)
    assert found == {"upward": [], "cycles": [], "back doors": []}


def test_every_module_is_in_a_layer() -> None:
    for name in modules(REPO):
        layer_of(name)


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for top in ROOTS:
        (tmp_path / top).mkdir(exist_ok=True)
    return tmp_path


@pytest.mark.parametrize("files, kind, expect", [
    ({"compiler/__init__.py": "", "compiler/tables.py": "def f():\n    from backends.bmv2 import emit\n",
      "backends/__init__.py": "", "backends/bmv2/__init__.py": "emit = 1\n"}, "upward", "compiler.tables"),
    ({"compiler/__init__.py": "", "compiler/dnf.py": "import importlib\nimportlib.import_module(f'runtime.{x}')\n",
      "runtime/__init__.py": ""}, "upward", "compiler.dnf"),
    ({"compiler/__init__.py": "", "compiler/a.py": "from compiler import b\n",
      "compiler/b.py": "def f():\n    from compiler.a import g\n"}, "cycles", "compiler.a"),
    ({"compiler/__init__.py": "", "compiler/spec/__init__.py": "__all__ = ['Spec']\nfrom compiler.spec.model import Spec\n",
      "compiler/spec/model.py": "Spec = 1\n", "compiler/spec/reader.py": "read = 1\n",
      "compiler/tables.py": "from compiler.spec.reader import read\n"}, "back doors", "compiler.spec.reader"),
    ({"compiler/__init__.py": "", "compiler/spec/__init__.py": "__all__ = ['Spec']\nSpec = 1\nother = 2\n",
      "compiler/tables.py": "from compiler.spec import other\n"}, "back doors", "other"),
])
def test_each_kind_of_violation_is_found(tmp_path: Path, files: dict[str, str], kind: str, expect: str) -> None:
    found = violations(_tree(tmp_path, files))
    assert any(expect in str(v) for v in found[kind]), found
    assert all(not v for k, v in found.items() if k != kind), found
