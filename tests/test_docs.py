"""The documentation cannot lie: it builds cleanly and every code block on its pages runs.

- The Sphinx site builds with warnings as errors (the README's command, into a
  temporary directory), and its API reference documents every public name: each entry
  of the ``__all__`` of every public module of ``privconf_sklearn``.
- The build runs every ``examples/plot_*.py`` script (sphinx-gallery; in its ``--quick``
  mode here, through ``PRIVCONF_EXAMPLES_QUICK=1``), and each gallery page shows the
  figure and the printed findings of that run: the gallery cannot go stale.
- Every page outside the API reference and the examples gallery (the start page, the
  getting-started pages, the user guide, the MAPIE migration guide) is executed, block
  by block, in document order and in one namespace per page, inside a temporary
  working directory, with every warning turned into an error:

  - ``.. code-block:: python`` blocks are executed;
  - doctest blocks (``>>>`` paragraphs) are executed and their printed output compared
    (ELLIPSIS and NORMALIZE_WHITESPACE);
  - ``.. code-block:: bash`` lines that start with ``python -m privconf_sklearn`` are run
    with this interpreter and must exit with 0; a ``.. code-block:: text`` block with
    ``:class: output`` right after one must equal what it printed;
  - other shell lines are not run (they install or build): they must appear verbatim in
    the README, whose commands CI runs, or run an existing script of ``examples/``
    (which ``tests/test_examples.py`` runs).
- Any other code-block language is refused, so no code can hide from the runner.
- The built site works offline: no page loads a remote script, stylesheet, image or
  font, and every page with math loads the bundled MathJax (``docs/_static/mathjax``);
  where a headless Chromium is installed, the math is rendered to SVG with the network
  off.
- What users read (README, every docs page, the example scripts, the package's
  docstrings and messages) cites no file outside the repository (``DESIGN.md``) and no
  internal paper numbers ("paper 003": papers are named by authors and year), and the
  code users copy (README and docs code, example scripts, docstring examples) imports
  nothing private.

The README's Python snippets are run by ``tests/test_readme.py``; the example scripts'
command lines by ``tests/test_examples.py``.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

import privconf_sklearn

pytest.importorskip("sphinx", reason="the [docs] extra (part of [dev]) builds the documentation")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: Generated while building, not written by anyone: the gallery pages (the example
#: scripts, which the build itself runs) and the user guide's generated tables.
GENERATED_DIRS = ("_build", "auto_examples", "_generated")
#: Pages whose code is only rendered, never run: the API reference has no code blocks
#: of its own; the generated pages are not pages of the guide.
NOT_EXECUTED_DIRS = ("api", "_static", *GENERATED_DIRS)

#: Code-block languages the runner knows; anything else fails the test.
KNOWN_LANGUAGES = ("python", "bash", "text", "json")

DOCTEST_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


# --------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class Block:
    """One runnable unit of a page: a code block or a doctest paragraph."""

    kind: str  # "python", "bash", "text", "json" or "doctest"
    source: str
    line: int  # 1-based line of the directive or of the first ">>>"
    options: tuple[str, ...] = ()


_DIRECTIVE = re.compile(r"^(\s*)\.\. code-block::\s*(\S*)\s*$")
_OTHER_CODE_DIRECTIVE = re.compile(r"^\s*\.\. (code|sourcecode|highlight|doctest|testcode)::")
_OPTION = re.compile(r"^\s+:([\w-]+):\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def parse_blocks(text: str, path: Path) -> list[Block]:
    """The code blocks and doctest paragraphs of an rst page, in document order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _OTHER_CODE_DIRECTIVE.match(line):
            raise AssertionError(
                f"{path}:{i + 1}: use '.. code-block:: <language>' so the runner sees the "
                f"code; got {line.strip()!r}"
            )
        match = _DIRECTIVE.match(line)
        if match:
            indent, language, start = len(match.group(1)), match.group(2), i + 1
            if language not in KNOWN_LANGUAGES:
                raise AssertionError(
                    f"{path}:{start}: code-block language {language!r} is not one of "
                    f"{KNOWN_LANGUAGES} that the docs runner executes or checks"
                )
            i += 1
            options = []
            while i < len(lines) and (option := _OPTION.match(lines[i])):
                options.append(" ".join(option.groups()).strip())
                i += 1
            body = []
            while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
                body.append(lines[i])
                i += 1
            source = textwrap.dedent("\n".join(body)).strip("\n")
            blocks.append(Block(language, source, start, tuple(options)))
            continue
        if line.lstrip().startswith(">>>"):
            start, body = i + 1, []
            while i < len(lines) and lines[i].strip():
                body.append(lines[i])
                i += 1
            blocks.append(Block("doctest", textwrap.dedent("\n".join(body)), start))
            continue
        i += 1
    return blocks


def executed_pages() -> list[Path]:
    """Every page of the guide: all rst files outside the API reference and gallery."""
    return sorted(
        path
        for path in DOCS.rglob("*.rst")
        if path.relative_to(DOCS).parts[0] not in NOT_EXECUTED_DIRS
    )


# --------------------------------------------------------- import order
def _top_modules(source: str) -> list[str]:
    """The top-level package of every import in ``source``, in order (doctests unwrapped)."""
    if source.lstrip().startswith(">>>"):
        parser = doctest.DocTestParser()
        source = "\n".join(example.source for example in parser.get_examples(source))
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module.split(".")[0]))
    return [name for _, name in sorted(found)]


def _imports_of_code_users_copy() -> dict[str, list[str]]:
    """The imported packages, in reading order, of each guide page (all its python blocks
    and doctests), of each README snippet and of each example script."""
    found: dict[str, list[str]] = {}
    for page in executed_pages():
        blocks = parse_blocks(page.read_text(encoding="utf-8"), page)
        found[str(page.relative_to(ROOT))] = [
            name
            for b in blocks
            if b.kind in ("python", "doctest")
            for name in _top_modules(b.source)
        ]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for i, snippet in enumerate(re.findall(r"^```python\n(.*?)^```", readme, re.S | re.M)):
        found[f"README.md snippet {i + 1}"] = _top_modules(snippet)
    for script in sorted((ROOT / "examples").glob("*.py")):
        found[str(script.relative_to(ROOT))] = _top_modules(script.read_text("utf-8"))
    return found


def test_diffprivlib_is_imported_after_privconf_sklearn_wherever_users_copy_code():
    """On scikit-learn >= 1.9 diffprivlib imports only after privconf_sklearn (its
    documented tree-alias step): a page, snippet or script that imports diffprivlib
    first fails with ImportError in a fresh interpreter, which the page runner (inside
    pytest, privconf_sklearn already imported) cannot see."""
    found = _imports_of_code_users_copy()
    assert sum("diffprivlib" in modules for modules in found.values()) >= 3  # not vacuous

    def diffprivlib_first(modules: list[str]) -> bool:
        if "diffprivlib" not in modules:
            return False
        return "privconf_sklearn" not in modules or modules.index("diffprivlib") < modules.index(
            "privconf_sklearn"
        )

    wrong = [where for where, modules in found.items() if diffprivlib_first(modules)]
    assert not wrong, f"diffprivlib imported before privconf_sklearn in: {wrong}"


# ------------------------------------------------------------------- execution
def _run_python(block: Block, namespace: dict, path: Path) -> None:
    code = compile(block.source, f"{path}:{block.line}", "exec")
    exec(code, namespace)


def _run_doctest(block: Block, namespace: dict, path: Path) -> None:
    parser = doctest.DocTestParser()
    test = parser.get_doctest(block.source, namespace, path.name, str(path), block.line - 1)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=DOCTEST_FLAGS, verbose=False)
    result = runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)
    assert result.failed == 0, f"{path}:{block.line}: doctest failed\n" + "".join(report)


_PACKAGE_COMMAND = re.compile(r"^python -m privconf_sklearn(\s|$)")
_EXAMPLE_COMMAND = re.compile(r"^(\.venv/bin/)?python3? (examples/\S+\.py)(\s.*)?$")


def _shell_lines(block: Block) -> list[str]:
    joined = block.source.replace("\\\n", " ")
    return [line.strip() for line in joined.splitlines() if line.strip()]


def _run_shell(block: Block, path: Path, cwd: Path) -> str:
    """Run the package's command lines; check the others; return the last output."""
    output = ""
    for line in _shell_lines(block):
        command = line.split("  #")[0].strip()
        if _PACKAGE_COMMAND.match(command):
            arguments = shlex.split(command)[1:]
            done = subprocess.run(
                [sys.executable, *arguments],
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert done.returncode == 0, (
                f"{path}:{block.line}: {command!r} exited with {done.returncode}\n"
                f"{done.stdout}\n{done.stderr}"
            )
            output = done.stdout
            continue
        example = _EXAMPLE_COMMAND.match(command)
        if example:
            assert (ROOT / example.group(2)).is_file(), f"{path}:{block.line}: no {example[2]}"
            continue
        assert command in README, (
            f"{path}:{block.line}: shell command {command!r} is neither run by the docs "
            "runner nor one of the README's commands"
        )
    return output


def _normalise(text: str) -> list[str]:
    return [line.rstrip() for line in text.strip("\n").splitlines()]


def run_page(path: Path, cwd: Path) -> int:
    """Run every block of ``path``; return the number of blocks executed or checked."""
    namespace: dict = {"__name__": "__docs__"}
    last_output: str | None = None  # stdout of the previous block, if it was a command
    checked = 0
    for block in parse_blocks(path.read_text(encoding="utf-8"), path):
        output = None
        if block.kind == "python":
            _run_python(block, namespace, path)
        elif block.kind == "doctest":
            _run_doctest(block, namespace, path)
        elif block.kind == "bash":
            output = _run_shell(block, path, cwd)
        elif block.kind == "text" and "class output" in block.options:
            where = f"{path}:{block.line}"
            assert last_output is not None, f"{where}: an output block must follow a command"
            assert _normalise(block.source) == _normalise(last_output), (
                f"{where}: documented output differs from the command's:\n{last_output}"
            )
        else:
            last_output = None
            continue
        checked += 1
        last_output = output
    return checked


@pytest.mark.slow
@pytest.mark.parametrize(
    "page", executed_pages(), ids=lambda p: str(p.relative_to(DOCS)).removesuffix(".rst")
)
def test_page_code_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_page(page, tmp_path)


def test_runner_sees_the_tutorial_blocks():
    """The parser finds the blocks it must run (a parser that found nothing would pass)."""
    blocks = parse_blocks((DOCS / "getting_started" / "tutorial.rst").read_text(), DOCS)
    kinds = {block.kind for block in blocks}
    assert {"python", "doctest", "bash", "text"} <= kinds
    assert sum(block.kind == "doctest" for block in blocks) >= 8


def test_runner_catches_a_wrong_output(tmp_path):
    page = tmp_path / "page.rst"
    page.write_text(".. code-block:: python\n\n   x = 2\n\n>>> x + 1\n4\n")
    with pytest.raises(AssertionError, match="doctest failed"):
        run_page(page, tmp_path)


def test_runner_refuses_unknown_languages_and_commands(tmp_path):
    page = tmp_path / "page.rst"
    page.write_text(".. code-block:: ruby\n\n   puts 1\n")
    with pytest.raises(AssertionError, match="not one of"):
        run_page(page, tmp_path)
    page.write_text(".. code-block:: bash\n\n   echo not-a-documented-command\n")
    with pytest.raises(AssertionError, match="neither run"):
        run_page(page, tmp_path)


# ----------------------------------------------------------------------- build
#: What the build reads from the repository: the pages, the gallery's scripts and the
#: benchmark scripts that generate the user guide's figures.
BUILD_SOURCES = ("docs", "examples", "benchmarks")


@pytest.fixture(scope="session")
def built_site(tmp_path_factory):
    """Build the site once, as the README says, with warnings as errors.

    The build runs in a private copy of the sources: sphinx-gallery writes its pages and
    thumbnails next to the sources (``docs/auto_examples``), so two builds sharing the
    working tree (two pytest-xdist workers, or a contributor's own build) would race on
    those files. Once per worker: every test using it is marked
    ``xdist_group("docs-build")``, so that pytest-xdist (``--dist loadgroup``) runs them
    all in the same worker.
    """
    sources = tmp_path_factory.mktemp("sources")
    for name in BUILD_SOURCES:
        shutil.copytree(
            ROOT / name,
            sources / name,
            ignore=shutil.ignore_patterns(*GENERATED_DIRS, "__pycache__", "results"),
        )
    output = tmp_path_factory.mktemp("html")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    done = subprocess.run(
        [*command, str(sources / "docs"), str(output)],
        cwd=sources,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PRIVCONF_EXAMPLES_QUICK": "1"},
    )
    return done, output


def test_readme_gives_the_build_command():
    assert "python -m sphinx -W --keep-going -b html docs docs/_build/html" in README


@pytest.mark.slow
@pytest.mark.xdist_group("docs-build")
def test_docs_build_without_warnings(built_site):
    done, output = built_site
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert (output / "index.html").is_file()


EXAMPLE_SCRIPTS = sorted((ROOT / "examples").glob("*.py"))


def test_gallery_has_the_examples():
    assert sum(path.name.startswith("plot_") for path in EXAMPLE_SCRIPTS) >= 5


@pytest.mark.slow
@pytest.mark.xdist_group("docs-build")
@pytest.mark.parametrize("script", EXAMPLE_SCRIPTS, ids=lambda path: path.stem)
def test_gallery_page_shows_the_run(built_site, script):
    """Each plot_ script ran during the build: its page has the figure and the output."""
    done, output = built_site
    assert done.returncode == 0, done.stderr
    page = (output / "auto_examples" / f"{script.stem}.html").read_text(encoding="utf-8")
    text = re.sub(r"<[^>]+>", "", page)
    assert f"python examples/{script.name}" in text  # the command, from the docstring
    ran = "sphx-glr-script-out" in page
    if script.name.startswith("plot_"):
        figure = re.search(rf'src="[^"]*images/sphx_glr_{script.stem}_\d+\.png"', page)
        assert figure and ran, f"{script.name}: no figure or no printed output on its page"
        printed = re.search(r"sphx-glr-script-out.*?<pre>(.*?)</pre>", page, re.S)
        assert re.search(r"\d\.\d\d", printed.group(1)), f"{script.name}: no numbers printed"
    else:
        assert not ran, f"{script.name} must not run during the build"


def _public_names() -> list[tuple[str, str]]:
    names = [("privconf_sklearn", name) for name in privconf_sklearn.__all__]
    for module in pkgutil.walk_packages(privconf_sklearn.__path__, "privconf_sklearn."):
        if any(part.startswith("_") for part in module.name.split(".")[1:]):
            continue
        imported = importlib.import_module(module.name)
        names.extend((module.name, name) for name in getattr(imported, "__all__", ()))
    return [(module, name) for module, name in names if name != "__version__"]


def _documented_objects(output: Path) -> dict[str, object]:
    from sphinx.util.inventory import InventoryFile

    with open(output / "objects.inv", "rb") as stream:
        inventory = InventoryFile.load(stream, "", lambda base, uri: uri)
    entries_by_kind = getattr(inventory, "data", inventory)  # a dict before Sphinx 8.2
    documented = {}
    for kind, entries in entries_by_kind.items():
        if not kind.startswith("py:") or kind == "py:module":
            continue
        for full_name in entries:
            module_name, _, attribute = full_name.rpartition(".")
            try:
                documented[full_name] = getattr(importlib.import_module(module_name), attribute)
            except (ImportError, AttributeError):
                continue  # a method or attribute of a class
    return documented


@pytest.mark.slow
@pytest.mark.xdist_group("docs-build")
def test_api_reference_documents_every_public_name(built_site):
    """Each ``__all__`` entry is documented, under its own name or as the same object."""
    done, output = built_site
    assert done.returncode == 0, done.stderr
    documented = _documented_objects(output)
    by_name: dict[str, list[object]] = {}
    for full_name, obj in documented.items():
        by_name.setdefault(full_name.rpartition(".")[2], []).append(obj)
    missing = []
    for module, name in _public_names():
        if f"{module}.{name}" in documented:
            continue
        obj = getattr(importlib.import_module(module), name)
        if not any(other is obj for other in by_name.get(name, ())):
            missing.append(f"{module}.{name}")
    assert not missing, f"public names missing from the API reference: {missing}"


# ------------------------------------------------------------- offline site
class _ResourceCollector(HTMLParser):
    """The URLs a page loads by itself (scripts, stylesheets, images, media, frames)."""

    LOADING = {
        "script": ("src",),
        "img": ("src", "srcset"),
        "iframe": ("src",),
        "embed": ("src",),
        "object": ("data",),
        "audio": ("src",),
        "video": ("src", "poster"),
        "source": ("src", "srcset"),
        "track": ("src",),
    }

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        values = dict(attrs)
        if tag == "link":
            # a hyperlink relation (e.g. rel="author") loads nothing; these do
            rel = set((values.get("rel") or "").lower().split())
            if rel & {"stylesheet", "preload", "modulepreload", "icon", "manifest"}:
                self.urls.append(values.get("href") or "")
            return
        for attribute in self.LOADING.get(tag, ()):
            if values.get(attribute):
                self.urls.append(values[attribute])


_REMOTE = re.compile(r"^\s*(https?:)?//", re.I)
_CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", re.I)


def _remote_loads(output: Path) -> list[str]:
    found = []
    for page in output.rglob("*.html"):
        collector = _ResourceCollector()
        collector.feed(page.read_text(encoding="utf-8"))
        found += [
            f"{page.relative_to(output)}: {url}" for url in collector.urls if _REMOTE.match(url)
        ]
    for sheet in output.rglob("*.css"):
        urls = _CSS_URL.findall(sheet.read_text(encoding="utf-8", errors="replace"))
        found += [f"{sheet.relative_to(output)}: {url}" for url in urls if _REMOTE.match(url)]
    return found


def test_remote_load_detector_sees_scripts_styles_and_css_urls(tmp_path):
    (tmp_path / "page.html").write_text(
        '<link rel="stylesheet" href="https://cdn.example/a.css">'
        '<link rel="author" href="https://example.org">'
        '<script src="//cdn.example/b.js"></script><a href="https://example.org">x</a>'
    )
    (tmp_path / "style.css").write_text("@font-face { src: url('https://fonts.example/f.woff2') }")
    found = _remote_loads(tmp_path)
    assert len(found) == 3 and all("example/" in entry for entry in found), found


@pytest.mark.slow
@pytest.mark.xdist_group("docs-build")
def test_site_loads_nothing_remote(built_site):
    """Every script, stylesheet, image and font of the site comes with the site."""
    done, output = built_site
    assert done.returncode == 0, done.stderr
    assert not _remote_loads(output), _remote_loads(output)


_MATH_MARKUP = re.compile(r'class="math[ "]')
_MATHJAX_SCRIPT = re.compile(r'<script[^>]*src="([^"?]*mathjax/tex-svg-full\.js)[^"]*"')


def _math_pages(output: Path) -> list[Path]:
    return sorted(
        page for page in output.rglob("*.html") if _MATH_MARKUP.search(page.read_text("utf-8"))
    )


@pytest.mark.slow
@pytest.mark.xdist_group("docs-build")
def test_math_pages_load_the_bundled_renderer(built_site):
    """Pages with math load MathJax from the site itself; the bundle needs no network.

    The single-file TeX-to-SVG component carries every TeX extension and draws glyphs as
    SVG paths, so it fetches no further component or font; with the menu off nothing
    loads accessibility extensions on demand.
    """
    done, output = built_site
    assert done.returncode == 0, done.stderr
    pages = _math_pages(output)
    assert len(pages) >= 5, "the user guide's mechanism pages have math"
    for page in pages:
        html = page.read_text(encoding="utf-8")
        script = _MATHJAX_SCRIPT.search(html)
        assert script, f"{page.name} has math but does not load the bundled MathJax"
        assert (page.parent / script.group(1)).resolve().is_file()
        assert 'window.MathJax = {"options": {"enableMenu": false}}' in html, page.name
    bundle = (output / "_static" / "mathjax" / "tex-svg-full.js").read_text(encoding="utf-8")
    assert 'VERSION="3.2.2"' in bundle


_CHROMIUM = next(
    (path for name in ("chromium", "chromium-browser") if (path := shutil.which(name))), None
)


@pytest.mark.slow
@pytest.mark.xdist_group("docs-build")
@pytest.mark.skipif(_CHROMIUM is None, reason="needs a headless Chromium (Debian: chromium)")
def test_math_renders_with_the_network_off(built_site, tmp_path):
    """In a browser that can resolve no host, every formula becomes SVG, none an error."""
    done, output = built_site
    assert done.returncode == 0, done.stderr
    for page in _math_pages(output):
        expected = len(_MATH_MARKUP.findall(page.read_text(encoding="utf-8")))
        rendered = subprocess.run(
            [
                _CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={tmp_path / 'profile'}",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--virtual-time-budget=20000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "HOME": str(tmp_path)},
        ).stdout
        containers = rendered.count("<mjx-container")
        assert containers == expected, f"{page.name}: {containers} of {expected} rendered"
        assert rendered.count("<svg") >= expected
        body = re.sub(r"<style.*?</style>", "", rendered, flags=re.S)  # MathJax's own CSS
        assert "merror" not in body and "data-mjx-error" not in body, page.name


# ----------------------------------------------------------- what users read
#: Text users read must not cite a file they do not have, nor the internal numbering
#: of the papers (name them by authors and year).
FORBIDDEN_IN_USER_TEXT = {
    "a file outside the repository (DESIGN.md)": re.compile(r"DESIGN\.md"),
    "an internal paper number (name the paper by authors and year)": re.compile(
        r"\bpapers?[ _-]?0\d\d\b", re.IGNORECASE
    ),
}

PACKAGE = ROOT / "privconf_sklearn"


def _package_strings() -> Iterator[tuple[str, str]]:
    """Every string literal of the package (docstrings and messages), with its place."""
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f"{path.relative_to(ROOT)}:{node.lineno}", node.value


def _user_texts() -> Iterator[tuple[str, str]]:
    """(place, text) of everything users read: README, docs pages, examples, package."""
    pages = [
        ROOT / "README.md",
        *sorted(DOCS.rglob("*.rst")),
        *sorted((ROOT / "examples").rglob("*.py")),
    ]
    for path in pages:
        if any(part in GENERATED_DIRS for part in path.parts):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield f"{path.relative_to(ROOT)}:{number}", line
    yield from _package_strings()


def _forbidden_references(texts) -> list[str]:
    return [
        f"{place}: cites {what}: {match.group(0)!r}"
        for place, text in texts
        for what, pattern in FORBIDDEN_IN_USER_TEXT.items()
        if (match := pattern.search(text))
    ]


def test_reference_scanner_finds_what_it_must():
    texts = [("a", "see DESIGN.md correction 9"), ("b", "as in paper 003"), ("c", "Paper002")]
    texts.append(("d", "Angelopoulos et al. (2022), Sec. 3"))
    assert [entry[0] for entry in _forbidden_references(texts)] == ["a", "b", "c"]


def test_user_facing_text_cites_no_private_file_or_paper_number():
    found = _forbidden_references(_user_texts())
    assert not found, "\n".join(found)


def _imports_something_private(source: str) -> list[str]:
    """The private privconf_sklearn modules or names a piece of code imports."""
    tree = ast.parse(source)
    private = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
            names: list[str] = []
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules = [node.module]
            names = [alias.name for alias in node.names]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            if parts[0] != "privconf_sklearn":
                continue
            if any(part.startswith("_") for part in parts[1:]) or any(
                name.startswith("_") for name in names
            ):
                private.append(f"{module}: {', '.join(names) or module}")
    return private


def _doctest_source(text: str) -> str:
    examples = doctest.DocTestParser().get_examples(text)
    return "".join(example.source for example in examples)


def _user_code() -> Iterator[tuple[str, str]]:
    """(place, source) of the code users copy: README, docs, examples, docstring examples."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for number, block in enumerate(re.findall(r"```python\n(.*?)```", readme, re.S), 1):
        yield f"README.md python block {number}", block
    for page in sorted(DOCS.rglob("*.rst")):
        if any(part in GENERATED_DIRS for part in page.parts):
            continue
        for block in parse_blocks(page.read_text(encoding="utf-8"), page):
            if block.kind == "python":
                yield f"{page.relative_to(ROOT)}:{block.line}", block.source
            elif block.kind == "doctest":
                yield f"{page.relative_to(ROOT)}:{block.line}", _doctest_source(block.source)
    for script in sorted((ROOT / "examples").rglob("*.py")):
        yield str(script.relative_to(ROOT)), script.read_text(encoding="utf-8")
    for place, text in _package_strings():
        if ">>>" in text:
            yield place, _doctest_source(text)


def test_private_import_detector():
    assert _imports_something_private("from privconf_sklearn._validation import x")
    assert _imports_something_private("import privconf_sklearn.mechanisms._base")
    assert _imports_something_private("from privconf_sklearn import _demo")
    assert not _imports_something_private(
        "from privconf_sklearn.mechanisms import ExponQ\nimport privconf_sklearn\n"
        "from sklearn.utils._param_validation import Interval"
    )


def test_user_facing_code_imports_nothing_private():
    found = [
        f"{place}: imports {entry}"
        for place, source in _user_code()
        for entry in _imports_something_private(source)
    ]
    assert not found, "\n".join(found)


def test_mutation_check_page_lists_every_mutant():
    """The developer page's table names every mutant of tools/mutation_check.py."""
    spec = importlib.util.spec_from_file_location(
        "mutation_check", ROOT / "tools" / "mutation_check.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    page = (DOCS / "developer" / "mutation_check.rst").read_text(encoding="utf-8")
    missing = [mutant.name for mutant in module.MUTANTS if f"``{mutant.name}``" not in page]
    assert len(module.MUTANTS) >= 15 and not missing, missing
    for mutant in module.MUTANTS:
        source = (ROOT / mutant.path).read_text(encoding="utf-8")
        for test in mutant.tests:  # a file, or a node id "file::test_name"
            path, _, name = test.partition("::")
            assert (ROOT / path).is_file(), (mutant.name, test)
            text = (ROOT / path).read_text(encoding="utf-8")
            assert not name or f"def {name.split('[')[0]}(" in text, (mutant.name, test)
        # Exactly once: a refactor that moves the line makes the mutant stale (and the
        # strict mutation check in CI fail); caught here, in the fast suite, first.
        count = source.count(mutant.original)
        assert count == 1, f"{mutant.name}: original text found {count} times in {mutant.path}"


def test_the_guide_names_expon_qs_default_scaling():
    """The pages that name ExponQ's default scaling name the code's default."""
    from privconf_sklearn.mechanisms import ExponQ

    default = inspect.signature(ExponQ).parameters["scaling"].default
    patterns = {
        "mechanisms/expon_q.rst": [
            r'``scaling="(\w+)"``\n\s+``"\w+"`` \(default',
            r'[Tt]he default ``scaling="(\w+)"``',
        ],
        "privacy.rst": [r'its default ``scaling="(\w+)"``'],
    }
    stated = [
        (page, found)
        for page, page_patterns in patterns.items()
        for pattern in page_patterns
        for found in re.findall(pattern, (DOCS / "user_guide" / page).read_text("utf-8"))
    ]
    assert len(stated) >= 2  # the parameter list and the privacy page
    assert all(found == default for _, found in stated), (default, stated)
