"""The documentation cannot lie: it builds cleanly and every code block on its pages runs.

- The Sphinx site builds with warnings as errors (the README's command, into a
  temporary directory), and its API reference documents every public name: each entry
  of the ``__all__`` of every public module of ``privconf_sklearn``.
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

The example scripts themselves are run by ``tests/test_examples.py``.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import re
import shlex
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

import privconf_sklearn

pytest.importorskip("sphinx", reason="the [docs] extra (part of [dev]) builds the documentation")

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text(encoding="utf-8")

#: Pages whose code is only rendered, never run: the API reference has no code blocks
#: of its own and the gallery pages include the example scripts (run elsewhere).
NOT_EXECUTED_DIRS = ("api", "examples", "_build", "_static")

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
            while i < len(lines) and _OPTION.match(lines[i]):
                options.append(" ".join(_OPTION.match(lines[i]).groups()).strip())
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
@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """Build the site once, as the README says, with warnings as errors."""
    output = tmp_path_factory.mktemp("html")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    done = subprocess.run(
        [*command, str(DOCS), str(output)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, output


def test_readme_gives_the_build_command():
    assert "python -m sphinx -W --keep-going -b html docs docs/_build/html" in README


def test_docs_build_without_warnings(built_site):
    done, output = built_site
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert (output / "index.html").is_file()


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
