"""The documentation's code examples run, so the docs cannot rot.

Every ```python block of every page under ``docs/`` (and of the README) is executed; the
blocks of one page run in order in one namespace, as a reader would run them, in a fresh
Python process with none of the test suite's settings (no forced host devices, no
compilation cache): a reader's copy of an example must work on its own. A block is skipped
only when the line before its opening fence is ``<!-- no-test -->`` (meant for snippets that
need hardware or services a test machine lacks). A block after ``<!-- file: NAME -->`` is a
file the reader saves (a model file the page then runs a tool on): it is written as ``NAME``
in the page's working folder, not executed. Tracebacks point at the Markdown file and line.

The API pages are checked against the modules: each shows exactly the module's ``__all__``.

The table of distribution classes in ``docs/api/distributions.md`` is static; it is checked
here against the installed numpyro when that is the version the page names (other supported
versions skip the check), and a failure prints the table to paste.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpyro
import numpyro.distributions as nd
import pytest

from stabledist import handlers

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SKIP_MARK = "<!-- no-test -->"
FILE_MARK = re.compile(r"^<!-- file: (?P<name>[\w.-]+) -->$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the first code line
    source: str
    skip: bool
    file: str | None = None  # a file the reader saves, written rather than run


def code_blocks(path: Path) -> list[Block]:
    """The fenced code blocks of ``path`` whose language is python, in page order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        info = match["info"].strip().lstrip("{").lstrip(".")
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        if end == len(lines):
            raise AssertionError(f"{path}:{i + 1}: unclosed code fence")
        if info.split(" ", 1)[0] in ("python", "py"):
            body = [line[len(indent):] if line.startswith(indent) else line
                    for line in lines[i + 1 : end]]
            before = next((lines[k].strip() for k in range(i - 1, -1, -1) if lines[k].strip()), "")
            saved = FILE_MARK.match(before)
            blocks.append(Block(path, i + 2, "\n".join(body) + "\n", before == SKIP_MARK,
                                saved["name"] if saved else None))
        i = end + 1
    return blocks


# starts fresh processes or environments: `make test-integration` (CI), not `make test`
pytestmark = pytest.mark.integration

PAGES = sorted(p for p in [*DOCS.rglob("*.md"), ROOT / "README.md"]
               if any(not b.skip for b in code_blocks(p)))

# Runs the blocks of one page in order, in one namespace, then checks numpyro's handler stack.
# The blocks come as JSON, so the runner imports nothing before the page does (a page that sets
# XLA_FLAGS before importing jax must be the first to touch jax, as in a reader's script).
RUNNER = """
import json
namespace = {{"__name__": "__main__"}}
for line, source, path, file in json.load(open({blocks!r})):
    if file:
        open(file, "w").write(source)
        continue
    exec(compile("\\n" * (line - 1) + source, path, "exec"), namespace)
from numpyro.primitives import _PYRO_STACK
assert not _PYRO_STACK, "the page left numpyro handlers on the stack"
"""
# What the test suite sets (tests/conftest.py) and a reader's shell does not.
SUITE_ENV = ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
             "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "JAX_ENABLE_X64", "PYTHONHASHSEED")


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in SUITE_ENV
           and not k.startswith(("PYTEST_", "HYPOTHESIS"))}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's stabledist, as an installed one would be
    blocks = tmp_path / "blocks.json"
    blocks.write_text(json.dumps([(b.line, b.source, str(page), b.file)
                                  for b in code_blocks(page) if not b.skip]))
    script = RUNNER.format(blocks=str(blocks))
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, f"{page.relative_to(ROOT)} failed on its own:\n{run.stderr}"


def test_skipped_blocks_are_rare() -> None:
    skipped = [f"{b.path.relative_to(DOCS)}:{b.line}"
               for p in sorted(DOCS.rglob("*.md")) for b in code_blocks(p) if b.skip]
    assert len(skipped) <= 3, f"too many untested examples: {skipped}"


# --- the static table of distribution classes ----------------------------------------------

# generated with the stubs (`make stubs`, tools/generate_stubs.py)
sys.path.insert(0, str(ROOT / "tools"))
from generate_stubs import TABLE_END, TABLE_START, distribution_table  # noqa: E402


def test_distribution_table_is_current() -> None:
    page = (DOCS / "api" / "distributions.md").read_text(encoding="utf-8")
    written_for = re.search(r"written for numpyro (\S+?);", page)
    assert written_for, "docs/api/distributions.md must say which numpyro its table is for"
    if written_for[1] != numpyro.__version__:
        pytest.skip(f"the table is written for numpyro {written_for[1]}, "
                    f"numpyro {numpyro.__version__} is installed")
    start, end = page.index(TABLE_START) + len(TABLE_START), page.index(TABLE_END)
    expected = distribution_table()
    assert page[start:end].strip() == expected, (
        "docs/api/distributions.md is out of date with the installed numpyro: run `make stubs`"
    )


# --- the API pages ---------------------------------------------------------------------------

DIRECTIVE = re.compile(r"^::: (?P<module>[\w.]+)\n(?P<options>(?:    .*\n|\n)*)", re.M)


def _documented(page: Path) -> dict[str, set[str] | None]:
    """module -> the members a page lists (None: all public ones, i.e. its __all__)."""
    shown: dict[str, set[str] | None] = {}
    for match in DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
        options = match["options"]
        if re.search(r"members: false", options):
            shown[match["module"]] = set()
        elif "members:" in options:
            shown[match["module"]] = set(re.findall(r"^        - (\w+)$", options, re.M))
        else:
            shown[match["module"]] = None
    return shown


def test_mkdocstrings_shows_public_names_only() -> None:
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "filters: public" in config  # griffe then renders exactly a module's __all__
    assert "docstring_style: google" in config


@pytest.mark.parametrize("page", sorted((DOCS / "api").glob("*.md")), ids=lambda p: p.name)
def test_api_page_shows_exactly_all(page: Path) -> None:
    for module_name, members in _documented(page).items():
        module = importlib.import_module(module_name)
        public = set(module.__all__)
        if module_name == "stabledist":
            # The numpyro names are on the Distribution classes page.
            public -= set(nd.__all__) - {"Distribution"}
        elif module_name == "stabledist.handlers":
            public = {"seed"}  # the re-exported ones are in the page's table (next test)
        elif members == set():  # a package page whose submodules follow on the same page
            submodules = {f"{module_name}.{n}" for n in public
                          if inspect.ismodule(getattr(module, n))}
            assert submodules <= set(_documented(page)), submodules
            continue
        if members is not None:
            assert members == public, f"{page.name}: {module_name} shows {sorted(members)}"


def test_handlers_page_lists_the_reexported_handlers() -> None:
    page = (DOCS / "api" / "handlers.md").read_text(encoding="utf-8")
    table = page[page.index("<!-- reexported-handlers: start -->"):
                 page.index("<!-- reexported-handlers: end -->")]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert listed == set(handlers.__all__) - {"seed"}
