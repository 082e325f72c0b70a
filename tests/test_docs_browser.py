"""The documentation site, as a reader sees it: every page in a real browser, and the docstrings
the API pages render.

``make test-integration`` builds the site (``mkdocs build --strict``) into a temporary
directory, serves it on 127.0.0.1 and opens every page in headless Chromium (playwright driving
the system's ``chromium``; ``make browser`` installs it) at a desktop width and a phone width.
A page fails on:

- cut-off content: a code block, table or other element whose content is wider than its box
  with no horizontal scrollbar to reach it, or that reaches past the viewport's right edge
  (``scrollWidth > clientWidth`` with ``overflow-x`` neither ``auto`` nor ``scroll``); code in
  a table cell broken across lines (tables scroll instead);
- raw markup in the rendered text: a literal ``\\|``, reST roles (``:class:``, ``:func:``, ...),
  unrendered ``[text][ref]`` cross-references, a leftover ``:::`` directive or code fence;
- broken links: an internal ``<a href>`` whose target is not served (HTTP status) or whose
  ``#anchor`` is no id on the target page;
- broken images (``naturalWidth == 0``).

All problems of one page are reported in one assertion message. Without Chromium or playwright
these tests skip, except in CI (``CI=true``), where they fail.

The fast test at the end (not ``integration``) checks that every public docstring starts with
a one-line summary, the line the API pages and editors show first.
"""

from __future__ import annotations

import functools
import http.server
import inspect
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading
import types
import urllib.error
import urllib.request
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urlsplit

import numpyro.distributions as nd
import pytest
import yaml

import stabledist
import stabledist.testing
from stabledist import handlers

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
WIDTHS = {"desktop": (1280, 800), "phone": (390, 844)}
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


def _page_path(md: Path) -> str:
    """The URL path mkdocs gives a Markdown page (``use_directory_urls``)."""
    rel = md.relative_to(DOCS).with_suffix("").as_posix()
    if rel == "index":
        return "/"
    return "/" + rel.removesuffix("/index") + "/"


PAGES = [*sorted(_page_path(p) for p in DOCS.rglob("*.md")), "/404.html"]


# --- the site, a server, a browser ------------------------------------------------------------


def _missing(reason: str) -> None:
    """Skip (a developer's machine without the browser), but fail in CI, which must run us."""
    if IN_CI:
        pytest.fail(f"{reason} (CI=true: the browser tests must run in CI; `make browser`)")
    pytest.skip(f"{reason}; `make browser` installs Chromium, pip installs playwright")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}{build.stderr}"
    return out


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the python package playwright is not installed")
    executable = os.environ.get("STABLEDIST_CHROMIUM") or next(
        (p for p in CHROMIUM_CANDIDATES if Path(p).exists()), shutil.which("chromium"))
    if not executable or not Path(executable).exists():
        _missing(f"no Chromium found ({', '.join(CHROMIUM_CANDIDATES)}, or STABLEDIST_CHROMIUM)")
    with sync_playwright() as playwright:
        # Debian's chromium, not playwright's download (its server is out of reach here).
        chromium = playwright.chromium.launch(executable_path=executable, headless=True,
                                              args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


# --- what the browser checks on a page --------------------------------------------------------

# Elements whose content is wider than what the reader can see. The ones the task is about
# (code blocks, table wrappers, tables, signatures) must scroll themselves or sit in a box
# that scrolls; any other element of the content column must not reach past a clipping box or
# the viewport's right edge. Only the outermost offender of a subtree is reported.
OVERFLOW_JS = r"""
() => {
  const viewport = document.documentElement.clientWidth;
  const scrolls = (s) => s.overflowX === "auto" || s.overflowX === "scroll";
  const visible = (el) => el.getClientRects().length > 0 && el.getBoundingClientRect().width > 0;
  const describe = (el) => {
    let name = el.tagName.toLowerCase();
    if (el.id) name += "#" + el.id;
    const cls = [...el.classList].slice(0, 2).join(".");
    if (cls) name += "." + cls;
    const text = (el.innerText || el.textContent || "").replace(/\s+/g, " ").trim();
    return name + ' "' + text.slice(0, 50) + (text.length > 50 ? "..." : "") + '"';
  };
  // the nearest ancestor (not the element) that scrolls horizontally, or null
  const scrollingAncestor = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (scrolls(getComputedStyle(a))) return a;
    }
    return null;
  };
  const problems = [];
  const reported = [];
  const report = (el, why) => {
    if (reported.some((r) => r.contains(el))) return;
    reported.push(el);
    problems.push(describe(el) + ": " + why);
  };
  const content = document.querySelector(".md-content") || document.body;
  const boxes = 'pre, pre > code, .highlight, table, .md-typeset__table, ' +
                '.md-typeset__scrollwrap, .doc-signature, .highlighttable';
  for (const el of content.querySelectorAll(boxes)) {
    if (!visible(el)) continue;
    const style = getComputedStyle(el);
    const extra = el.scrollWidth - el.clientWidth;
    if (extra > 1 && !scrolls(style) && !scrollingAncestor(el)) {
      report(el, `content ${extra}px wider than its box and no horizontal scrollbar ` +
                 `(overflow-x: ${style.overflowX})`);
    }
  }
  for (const el of content.querySelectorAll("*")) {
    if (!visible(el)) continue;
    const right = el.getBoundingClientRect().right;
    let clipped = null;
    for (let a = el.parentElement; a && a !== document.documentElement; a = a.parentElement) {
      const s = getComputedStyle(a);
      if (scrolls(s)) break;  // reachable by scrolling that box
      if ((s.overflowX === "hidden" || s.overflowX === "clip") &&
          right > a.getBoundingClientRect().right + 1) {
        clipped = a;
        break;
      }
    }
    if (clipped) {
      report(el, `cut off ${Math.round(right - clipped.getBoundingClientRect().right)}px ` +
                 `by ${describe(clipped).split(" ")[0]} (overflow-x: hidden)`);
    } else if (right > viewport + 1 && !scrollingAncestor(el)) {
      report(el, `reaches ${Math.round(right - viewport)}px past the viewport's right edge`);
    }
  }
  // a table scrolls, so the code in its cells stays on one line (an identifier broken
  // mid-word, "stable_interna / ls()", reads as two)
  for (const el of content.querySelectorAll("td code, th code")) {
    if (visible(el) && el.getClientRects().length > 1) {
      report(el, "code in a table cell broken across lines");
    }
  }
  const page = document.documentElement.scrollWidth - viewport;
  if (page > 1) problems.push(`the page scrolls sideways by ${page}px`);
  return problems;
}
"""

# Rendered text with code blocks and permalink marks removed, the links and the images.
CONTENT_JS = r"""
async () => {
  const images = [...document.images];
  for (const img of images) img.loading = "eager";
  await Promise.all(images.map((img) => img.decode().catch(() => null)));
  const broken = images.filter((img) => img.naturalWidth === 0)
                       .map((img) => img.getAttribute("src"));
  const links = [...document.querySelectorAll("a[href]")].map((a) => ({
    href: a.href, raw: a.getAttribute("href"),
    text: (a.textContent || "").replace(/\s+/g, " ").trim().slice(0, 40)}));
  const article = (document.querySelector(".md-content") || document.body).cloneNode(true);
  for (const el of article.querySelectorAll("pre, script, style, .headerlink")) el.remove();
  // innerText of a detached clone has no line breaks: mark the blocks first
  for (const el of article.querySelectorAll("p, li, td, th, dt, dd, h1, h2, h3, h4, h5, h6, div")) {
    el.append("\n");
  }
  // API reference: the names of the documented objects (private or dunder ones must not show)
  const names = [...document.querySelectorAll(".doc-heading .doc-object-name")]
    .map((el) => (el.textContent || "").trim());
  return {broken, links, text: article.textContent, names};
}
"""

RAW_MARKUP = {
    "a literal \\|": re.compile(r"\\\|"),
    "a reST role": re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const|ref|"
                              r"doc|term|any):"),
    "an unrendered [text][ref] reference": re.compile(r"\[[^\[\]\n]+\]\[[^\[\]\n]*\]"),
    "a leftover ::: directive": re.compile(r":::"),
    "a leftover code fence": re.compile(r"```"),
}


def _raw_markup(text: str) -> list[str]:
    problems = []
    for what, pattern in RAW_MARKUP.items():
        for match in pattern.finditer(text):
            start, end = max(0, match.start() - 40), match.end() + 40
            context = re.sub(r"\s+", " ", text[start:end]).strip()
            problems.append(f"raw markup, {what}: ...{context}...")
    return problems


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if key in ("id", "name") and value is not None:
                self.ids.add(value)


@functools.cache
def _fetch(url: str) -> tuple[int, frozenset[str]]:
    """HTTP status of ``url`` and the ids of its HTML (cached: every page links the nav)."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            status, body = response.status, response.read()
            is_html = "html" in response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as error:
        return error.code, frozenset()
    parser = _Ids()
    if is_html:
        parser.feed(body.decode("utf-8", "replace"))
    return status, frozenset(parser.ids)


def _broken_links(links: list[dict[str, str]], origin: str) -> list[str]:
    problems = []
    for link in links:
        href = link["href"]
        if urlsplit(href).scheme not in ("http", "https") or not href.startswith(origin + "/"):
            continue  # mailto:, javascript:, other sites (no internet in tests)
        target, anchor = urldefrag(href)
        status, ids = _fetch(target)
        where = f'link "{link["text"]}" -> {link["raw"]}'
        if status != 200:
            problems.append(f"broken {where}: HTTP {status}")
        elif anchor and urllib.parse.unquote(anchor) not in ids:
            problems.append(f"broken {where}: no id {anchor!r} on {urlsplit(target).path}")
    return problems


@pytest.mark.integration
def test_every_built_page_is_checked(site: Path) -> None:
    built = {"/" + p.relative_to(site).as_posix().removesuffix("index.html")
             for p in site.rglob("*.html")}
    assert built == set(PAGES), f"pages built but not checked: {sorted(built - set(PAGES))}"


MAX_SHOWN = 60  # problems listed per page
NEXT_FRAME_JS = "() => new Promise((done) => requestAnimationFrame(() => done(null)))"


@pytest.mark.integration
@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.strip("/") or "index")
def test_page_in_browser(path: str, server: str, browser) -> None:
    """The page loaded once, at the first width, then resized to each other width (CSS lays
    it out again; a load per width cost a second each, over every page of the site)."""
    problems: list[str] = []
    (first, size), *others = WIDTHS.items()
    context = browser.new_context(viewport={"width": size[0], "height": size[1]})
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        response = page.goto(server + path, wait_until="load")
        assert response is not None
        if response.status != 200 and path != "/404.html":
            pytest.fail(f"{path}: HTTP {response.status}")
        page.wait_for_load_state("networkidle")
        content = page.evaluate(CONTENT_JS)  # the same markup, links and images at every width
        problems += [f"broken image: {src}" for src in content["broken"]]
        problems += _raw_markup(content["text"])
        problems += _broken_links(content["links"], server)
        problems += [f"private or dunder name in the API reference: {name}"
                     for name in content["names"] if name.rpartition(".")[2].startswith("_")]
        for width_name, (width, height) in [(first, size), *others]:
            page.set_viewport_size({"width": width, "height": height})
            page.evaluate(NEXT_FRAME_JS)  # the page's own resize handlers have run
            problems += [f"[{width_name} {width}px] {p}" for p in page.evaluate(OVERFLOW_JS)]
        problems += [f"javascript error: {e}" for e in errors]
    finally:
        context.close()
    problems = list(dict.fromkeys(problems))
    shown = problems[:MAX_SHOWN] + ([f"... and {len(problems) - MAX_SHOWN} more"]
                                    if len(problems) > MAX_SHOWN else [])
    assert not problems, f"{path}: {len(problems)} problem(s):\n  " + "\n  ".join(shown)


# --- the API pages show the public names only (fast, no browser) ----------------------------

DIRECTIVE = re.compile(r"^::: (?P<module>[\w.]+)\n(?P<options>(?:    .*\n|\n)*)", re.M)


def _directives(page: Path) -> list[tuple[str, dict]]:
    """The ``:::`` directives of a page: (module, options)."""
    out = []
    for match in DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
        block = yaml.safe_load(textwrap.dedent(match["options"])) or {}
        out.append((match["module"], block.get("options") or {}))
    return out


def test_testing_page_shows_exactly_testing_all() -> None:
    """docs/api/testing.md renders ``stabledist.testing`` through its private modules (where
    the names live): together they show exactly ``stabledist.testing.__all__``, no helper
    those modules keep public for each other."""
    shown: list[str] = []
    for module, options in _directives(DOCS / "api" / "testing.md"):
        if module in ("stabledist.testing", "stabledist.testing.catalog"):
            continue  # the package (members: false) and the public catalog module
        members = options.get("members")
        assert isinstance(members, list), f"{module}: list the public names it shows"
        shown += members
    expected = set(stabledist.testing.__all__) - {"catalog"}
    assert sorted(shown) == sorted(expected), (
        f"missing: {sorted(expected - set(shown))}, not public or twice: "
        f"{sorted(n for n in shown if n not in expected or shown.count(n) > 1)}")


@pytest.mark.parametrize("page", sorted((DOCS / "api").glob("*.md")), ids=lambda p: p.name)
def test_api_pages_hide_private_and_dunder_members(page: Path) -> None:
    """Every directive that shows classes filters out their ``_private`` and ``__dunder__``
    members (mkdocstrings' ``filters: public`` keeps special methods)."""
    for module, options in _directives(page):
        if options.get("members") is False:
            continue
        assert "!^_" in (options.get("filters") or []), (
            f"{page.name}: ::: {module} needs `filters: [\"!^_\"]`")


# --- every public docstring starts with a one-line summary (fast, no browser) ----------------


def _public_api() -> list[tuple[str, object]]:
    """The names a user calls: stabledist's own (not numpyro's classes and factories, which
    numpyro documents), ``handlers.seed``, ``stabledist.testing``; and the public methods and
    properties the classes among them define themselves."""
    objects: list[tuple[str, object]] = []
    for name in stabledist.__all__:
        if name not in nd.__all__:
            objects.append((f"stabledist.{name}", getattr(stabledist, name)))
    objects.append(("stabledist.handlers.seed", handlers.seed))
    for name in stabledist.testing.__all__:
        objects.append((f"stabledist.testing.{name}", getattr(stabledist.testing, name)))
    members = []
    for qualname, obj in objects:
        if inspect.isclass(obj) and obj.__module__.startswith("stabledist"):
            for attr, value in vars(obj).items():
                function = getattr(value, "__func__", value)
                if attr.startswith("_") or not (isinstance(value, property) or (
                        inspect.isfunction(function) and function.__name__ == attr)):
                    continue  # private, data, or a dataclass field's default (a lambda)
                members.append((f"{qualname}.{attr}", value))
    return objects + members


def _docstring(obj: object) -> str | None:
    """The object's own docstring ("" if it has none); None for data (a dict, a tuple), whose
    ``__doc__`` is its type's."""
    if isinstance(obj, classmethod | staticmethod):
        obj = obj.__func__
    if isinstance(obj, type | types.ModuleType | types.FunctionType | property):
        return obj.__doc__ or ""
    if callable(obj) and obj.__doc__ != type(obj).__doc__:
        return obj.__doc__ or ""
    return None


SUMMARY_MAX = 100


def _summary_problem(doc: str) -> str | None:
    if not doc.strip():
        return "no docstring"
    lines = inspect.cleandoc(doc).splitlines()
    first = lines[0].strip()
    if len(lines) > 1 and lines[1].strip():
        return f"the summary runs onto a second line: {first!r} / {lines[1].strip()!r}"
    if not first.endswith((".", "!", "?")):
        return f"the first line is not a complete sentence (no final period): {first!r}"
    if first[0].isalpha() and first[0].islower():
        return f"the first line does not start a sentence: {first!r}"
    if len(first) > SUMMARY_MAX:
        return f"the summary is longer than {SUMMARY_MAX} characters ({len(first)}): {first!r}"
    return None


def test_public_docstrings_start_with_a_summary() -> None:
    problems = []
    for qualname, obj in _public_api():
        doc = _docstring(obj)
        if doc is None:
            continue  # data: no docstring of its own
        problem = _summary_problem(doc)
        if problem:
            problems.append(f"{qualname}: {problem}")
    assert not problems, ("public docstrings must start with a one-line summary sentence, "
                          "then a blank line:\n  " + "\n  ".join(problems))
