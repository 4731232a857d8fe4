"""Style: the code base stays ruff-clean.

Only the repository's own files are linted: in a git checkout, the Python files git
tracks (``git ls-files``), so a scratch script left in a clone cannot fail the suite;
outside one (an unpacked source archive, git missing), the project's source folders.

Types are checked by CI, not here: ``.ci/run`` runs ``mypy`` (configured in
pyproject.toml, the whole package) in its newest-releases environment. mypy's verdict
depends on the versions of mypy and of numpy's type stubs, so inside the test suite it
would fail the oldest-versions environment for reasons that are not the code's; the
developer documentation (docs/developer/ci.rst) records this choice.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Folders holding the project's Python code, linted when git cannot list the files.
SOURCE_FOLDERS = ("privconf_sklearn", "tests", "tools", "benchmarks", "examples", "docs")


def tracked_python_files(root: Path) -> list[str] | None:
    """The ``.py`` files git tracks under ``root``, or None outside a git checkout."""
    if shutil.which("git") is None or not (root / ".git").exists():
        return None
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if listed.returncode != 0:
        return None
    return sorted(name for name in listed.stdout.split("\0") if name and (root / name).is_file())


def files_to_lint(root: Path) -> list[str]:
    """Tracked Python files; without git, the project's source folders that exist."""
    tracked = tracked_python_files(root)
    if tracked is not None:
        return tracked
    return [folder for folder in SOURCE_FOLDERS if (root / folder).is_dir()]


def test_ruff_clean():
    """``ruff check`` passes on the repository's files (ruff comes with the [dev] extra)."""
    pytest.importorskip("ruff", reason="ruff comes with the [dev] extra")
    files = files_to_lint(ROOT)
    assert files, "nothing to lint"
    # --force-exclude: pyproject.toml's exclusions apply to files named explicitly too.
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--force-exclude", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


#: Cyclomatic complexity no function may exceed, as radon counts it (``and``/``or``
#: included, which ruff's C901 does not count).
MAX_COMPLEXITY = 15

#: Temporary exceptions: functions allowed above the limit (none; add one only with its
#: reason). ``test_every_complexity_exception_is_still_needed`` fails once a name is no
#: longer over.
COMPLEXITY_ALLOWED: tuple[str, ...] = ()


def _functions(blocks):
    """Every function, method and nested function among radon's blocks."""
    for block in blocks:
        if hasattr(block, "methods"):  # a class
            yield from _functions(block.methods)
            yield from _functions(block.inner_classes)
        else:
            yield block
            yield from _functions(block.closures)


def complex_functions(limit: int = MAX_COMPLEXITY) -> list[tuple[str, str, int]]:
    """``(file, function, complexity)`` of every function of the package above ``limit``."""
    from radon.complexity import cc_visit

    found = []
    for path in sorted((ROOT / "privconf_sklearn").rglob("*.py")):
        for function in _functions(cc_visit(path.read_text(encoding="utf-8"))):
            if function.complexity > limit:
                name = path.relative_to(ROOT).as_posix()
                found.append((name, function.fullname, function.complexity))
    return found


def test_no_function_above_the_complexity_limit():
    """radon's cyclomatic complexity is at most 15 everywhere (radon comes with [dev])."""
    pytest.importorskip("radon", reason="radon comes with the [dev] extra")
    found = [f for f in complex_functions() if f[1].split(".")[-1] not in COMPLEXITY_ALLOWED]
    assert not found, "split these functions: " + ", ".join(f"{f}:{n} ({c})" for f, n, c in found)


@pytest.mark.parametrize("name", COMPLEXITY_ALLOWED)
def test_every_complexity_exception_is_still_needed(name):
    pytest.importorskip("radon", reason="radon comes with the [dev] extra")
    over = {function.split(".")[-1] for _, function, _ in complex_functions()}
    assert name in over, f"remove {name!r} from COMPLEXITY_ALLOWED"


def test_complexity_counts_and_or_and_nested_functions():
    """The measure the limit is about: boolean operators and closures count."""
    pytest.importorskip("radon", reason="radon comes with the [dev] extra")
    from radon.complexity import cc_visit

    source = "def f(a, b):\n    def g():\n        return a and b or a\n    return g\n"
    functions = {f.fullname: f.complexity for f in _functions(cc_visit(source))}
    assert functions == {"f": 1, "g": 3}
def test_untracked_scratch_files_are_not_linted(tmp_path):
    """In a git checkout an untracked file is not linted; without git, the source
    folders are (never the whole tree, with whatever else lies there)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_kept.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "tests/test_kept.py"], cwd=tmp_path, check=True)
    (tmp_path / "scratch.py").write_text("import os\n")  # untracked, and not ruff-clean
    (tmp_path / "tests" / "untracked.py").write_text("import os\n")
    assert files_to_lint(tmp_path) == ["tests/test_kept.py"]
    shutil.rmtree(tmp_path / ".git")
    assert files_to_lint(tmp_path) == ["tests"]
