"""The package's shape: a public face over private modules, no import circles, and a core that
knows nothing of its tests.

Every import statement counts (module level, function-local, under ``TYPE_CHECKING``): an
import inside a function is still a dependency, only a later one. A package's implicit import
of its parents is not an edge (it is not a statement; every module has it).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import stabledist

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "stabledist"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path) -> set[str]:
    """The stabledist modules ``path`` names in any import statement, wherever it stands."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path}: relative import"
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names
                         if f"{node.module}.{alias.name}" in MODULES)
    return {m for m in found if m in MODULES}


GRAPH = {name: imports_of(path) for name, path in MODULES.items()}


def _cycle() -> list[str] | None:
    """One import circle of the package, if there is any (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(GRAPH[m]):
            if state.get(n) == 1:
                return [*path[path.index(n):], n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(GRAPH):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_no_import_circle() -> None:
    assert _cycle() is None, " -> ".join(_cycle() or [])


def test_the_cycle_finder_finds_a_planted_circle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(GRAPH, "stabledist._src.introspect",
                        GRAPH["stabledist._src.introspect"] | {"stabledist._src.fork"})
    assert _cycle() is not None


def test_the_core_names_no_testing_module() -> None:
    core = {m: deps for m, deps in GRAPH.items() if not m.startswith("stabledist.testing")}
    offenders = {m: sorted(d for d in deps if d.startswith("stabledist.testing"))
                 for m, deps in core.items()}
    assert not {m: d for m, d in offenders.items() if d}


def test_import_runs_no_testing_or_catalog_code() -> None:
    code = ("import sys, stabledist; "
            "print(sorted(m for m in sys.modules if m.startswith(('stabledist.testing', "
            "'hypothesis'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout.strip()
    assert out == "[]"


def test_core_modules_are_private() -> None:
    """Outside ``stabledist._src`` only public faces: the package, its numpyro mirrors
    (generated at import, no files), ``handlers``, ``testing`` and the pickle shim."""
    public_files = {n for n in MODULES if not n.startswith(("stabledist._src",
                                                            "stabledist.testing."))}
    assert public_files == {"stabledist", "stabledist.handlers", "stabledist.testing",
                            "stabledist.fork"}
    for name in MODULES:
        tail = name.removeprefix("stabledist.testing.")
        if name.startswith("stabledist.testing.") and tail != "catalog":
            assert tail.startswith("_"), f"{name} should be private"


def test_every_public_name_resolves() -> None:
    for name in stabledist.__all__:
        assert getattr(stabledist, name) is not None, name
    import stabledist.testing as testing

    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
