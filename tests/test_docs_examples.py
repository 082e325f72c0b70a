"""The documentation's code examples run, so the docs cannot rot.

Every ```python block of every page under ``docs/`` is executed; the blocks of one page run in
order in one namespace, as a reader would run them. A block is skipped only when the line
before its opening fence is ``<!-- no-test -->`` (meant for snippets that need hardware or
services a test machine lacks). Tracebacks point at the Markdown file and line.

The table of distribution classes in ``docs/api/distributions.md`` is static; it is checked
here against the installed numpyro when that is the version the page names (other supported
versions skip the check), and a failure prints the table to paste.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from pathlib import Path

import numpyro
import numpyro.distributions as nd
import pytest
from numpyro.primitives import _PYRO_STACK

import stabledist as sd
from stabledist.testing import catalog

DOCS = Path(__file__).resolve().parent.parent / "docs"
SKIP_MARK = "<!-- no-test -->"
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the first code line
    source: str
    skip: bool


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
            blocks.append(Block(path, i + 2, "\n".join(body) + "\n", before == SKIP_MARK))
        i = end + 1
    return blocks


PAGES = sorted(p for p in DOCS.rglob("*.md") if any(not b.skip for b in code_blocks(p)))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_page_examples_run(page: Path) -> None:
    namespace: dict[str, object] = {"__name__": f"docs.{page.stem}"}
    for block in code_blocks(page):
        if block.skip:
            continue
        # Pad with blank lines so tracebacks give the line number in the Markdown file.
        code = compile("\n" * (block.line - 1) + block.source, str(page), "exec")
        exec(code, namespace)
    assert not _PYRO_STACK, f"{page.name} left numpyro handlers on the stack"


def test_skipped_blocks_are_rare() -> None:
    skipped = [f"{b.path.relative_to(DOCS)}:{b.line}"
               for p in sorted(DOCS.rglob("*.md")) for b in code_blocks(p) if b.skip]
    assert len(skipped) <= 3, f"too many untested examples: {skipped}"


# --- the static table of distribution classes ----------------------------------------------

NUMPYRO_DOCS = "https://num.pyro.ai/en/stable/distributions.html"
TABLE_START = "<!-- distribution-table: start -->"
TABLE_END = "<!-- distribution-table: end -->"


def distribution_table() -> str:
    """The Markdown table of every public numpyro.distributions class and factory."""
    classes, factories = catalog.public_names(nd)
    rows = [
        "| Name | Kind | numpyro module | Lazy values (cached externally) |",
        "| --- | --- | --- | --- |",
    ]
    for name in sorted(set(classes) | set(factories), key=str.lower):
        upstream = getattr(nd, name)
        module = upstream.__module__.rpartition(".")[2]
        if name in factories:
            kind, lazy = "factory", []
        else:
            stable = getattr(sd, name)
            kind = "class"
            lazy = sorted(
                attr
                for attr in dir(stable)
                if isinstance(inspect.getattr_static(stable, attr), sd.cached_lazy_property)
            )
        cached = ", ".join(f"`{attr}`" for attr in lazy) or "-"
        link = f"[`{name}`]({NUMPYRO_DOCS}#{name.lower()})"
        rows.append(f"| {link} | {kind} | `{module}` | {cached} |")
    return "\n".join(rows)


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
        "docs/api/distributions.md is out of date with the installed numpyro; replace the "
        f"table between the markers with:\n\n{expected}\n"
    )
