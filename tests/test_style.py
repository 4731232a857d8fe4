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
