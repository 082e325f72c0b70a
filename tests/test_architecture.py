"""The package's shape: a public face over private modules, a map of the core that is its code,
and a core that runs none of its tests' code at import (the layers and the forbidden imports
are import-linter's contracts in ``pyproject.toml``, run by ``make test``).

Every import statement counts (module level, function-local, under ``TYPE_CHECKING``): an
import inside a function is still a dependency, only a later one. A package's implicit import
of its parents is not an edge (it is not a statement; every module has it).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


CORE = "stabledist._src."
MAP = ROOT / "stabledist" / "_src" / "README.md"


def _map_table() -> dict[str, set[str]]:
    """The modules of the core's map (``_src/README.md``) and the imports it says each has."""
    rows = {}
    for line in MAP.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`") and cells[0] != "`module`":
            rows[cells[0].strip("`")] = {m.strip() for m in cells[2].split(",") if m.strip()}
    return rows


def test_the_map_names_every_core_module_and_its_imports() -> None:
    """The core's map is the code: its modules are the files of ``_src`` and each row's
    imports are the ``stabledist._src`` modules that file imports (the layers themselves are
    import-linter's contract, run by ``make test``)."""
    code = {name.removeprefix(CORE): {d.removeprefix(CORE) for d in deps if d.startswith(CORE)}
            for name, deps in GRAPH.items() if name.startswith(CORE)}
    assert _map_table() == code


def test_the_map_lists_the_layers_in_import_linters_order() -> None:
    """The map's rows, top layer first, follow the layers contract of ``pyproject.toml``."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c["layers"] for c in config["contracts"] if c["id"] == "core-layers")
    order = [m.strip() for layer in layers for m in layer.split("|")]
    assert list(_map_table()) == order


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
