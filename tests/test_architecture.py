"""The package's shape: a public face over private modules, a map of the core that is its code,
and a core that runs none of its tests' code at import (the layers and the forbidden imports
are import-linter's contracts in ``pyproject.toml``, run by ``make test``).

Every import statement counts (module level, function-local, under ``TYPE_CHECKING``): an
import inside a function is still a dependency, only a later one. A package's implicit import
of its parents is not an edge (it is not a statement; every module has it).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

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


def group_of(module: str) -> str:
    """The group of a core module: the package or module right below ``stabledist._src``."""
    return module.removeprefix(CORE).split(".")[0]


class MapGroup(NamedTuple):
    modules: set[str]  # full module names, from the group's table
    imports: set[str]  # the groups its "Imports:" line names


def _map_groups() -> dict[str, MapGroup]:
    """The groups of the core's map (``_src/README.md``), top first: a ``## `group`...``
    section each, with a table of its modules and an ``Imports:`` line naming, in backticks,
    the groups its modules import (or ``Imports: nothing.``)."""
    groups: dict[str, MapGroup] = {}
    current: MapGroup | None = None
    for line in MAP.read_text().splitlines():
        if heading := re.match(r"## `(\w+)`", line):
            name = heading[1]
            current = groups[name] = MapGroup(set(), set())
            one_module = (PACKAGE / "_src" / f"{name}.py").exists()  # a group of one module
            continue
        if current is None:
            continue
        if line.startswith("## "):
            current = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) == 2 and cells[0] not in ("module", "---"):
            module = cells[0].strip("`")
            current.modules.add(CORE + name if one_module and module == name
                                else f"{CORE}{name}.{module}")
        elif line.startswith("Imports:"):
            named = line.removeprefix("Imports:").split(".")[0]
            current.imports.update(re.findall(r"`(\w+)`", named))
    return groups


def _core_modules() -> set[str]:
    """The core's modules: its files, less the package inits (a group's face is the group)."""
    return {name for name, path in MODULES.items()
            if name.startswith(CORE) and path.name != "__init__.py"}


def test_the_map_names_every_core_module_in_its_group() -> None:
    """The core's map is the code: each group's table lists exactly the modules of that group
    (the files of its package, or the group's one module)."""
    groups = _map_groups()
    assert set(groups) == {group_of(m) for m in _core_modules()}
    for name, group in groups.items():
        assert group.modules == {m for m in _core_modules() if group_of(m) == name}, name


def test_the_map_names_the_imports_between_groups() -> None:
    """Each group's ``Imports:`` line is the groups its modules (its face included) import,
    and every one of them is below it in the map."""
    actual: dict[str, set[str]] = {}
    for name, deps in GRAPH.items():
        if name.startswith(CORE):
            actual.setdefault(group_of(name), set()).update(
                group_of(d) for d in deps if d.startswith(CORE) and group_of(d) != group_of(name))
    groups = _map_groups()
    order = list(groups)
    for name, group in groups.items():
        assert group.imports == actual.get(name, set()), name
        assert all(order.index(g) > order.index(name) for g in group.imports), name


def test_the_map_lists_the_groups_in_import_linters_order() -> None:
    """The map's groups, top first, are the layers of the ``core-layers`` contract of
    ``pyproject.toml`` (one group a layer)."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["id"] == "core-layers")
    assert contract["containers"] == ["stabledist._src"]
    assert list(_map_groups()) == contract["layers"]


def test_import_runs_no_testing_or_catalog_code() -> None:
    code = ("import sys, stabledist; "
            "print(sorted(m for m in sys.modules if m.startswith(('stabledist.testing', "
            "'hypothesis'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300).stdout.strip()
    assert out == "[]"


def test_core_modules_are_private() -> None:
    """Outside ``stabledist._src`` only public faces: the package, its numpyro mirrors
    (generated at import, no files), ``handlers``, ``testing``, ``benchmark`` and the pickle
    shim; the modules of ``testing`` and ``benchmark`` are private (but ``catalog`` and the
    command line, ``python -m stabledist.benchmark``)."""
    faces = ("stabledist.testing", "stabledist.benchmark")
    public_files = {n for n in MODULES if not n.startswith(("stabledist._src",
                                                            *(f"{f}." for f in faces)))}
    assert public_files == {"stabledist", "stabledist.handlers", "stabledist.fork", *faces}
    for name in MODULES:
        face, _, tail = name.rpartition(".")
        if face in faces and tail not in ("catalog", "__main__"):
            assert tail.startswith("_"), f"{name} should be private"


def test_every_public_name_resolves() -> None:
    for name in stabledist.__all__:
        assert getattr(stabledist, name) is not None, name
    import stabledist.testing as testing

    for name in testing.__all__:
        assert getattr(testing, name) is not None, name
