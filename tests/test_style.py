"""Style: the code base stays ruff-clean.

Types are checked by CI, not here: ``.ci/run`` runs ``mypy`` (configured in
pyproject.toml, the whole package) in its newest-releases environment. mypy's verdict
depends on the versions of mypy and of numpy's type stubs, so inside the test suite it
would fail the oldest-versions environment for reasons that are not the code's; the
developer documentation (docs/developer/ci.rst) records this choice.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    """``ruff check .`` passes (ruff comes with the [dev] extra)."""
    pytest.importorskip("ruff", reason="ruff comes with the [dev] extra")
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "."],
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
