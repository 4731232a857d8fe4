"""The README's code runs as written and shows informative results.

- Every ``python`` block of README.md runs on its own, in a fresh interpreter (a
  subprocess, inside a temporary directory), with warnings shown: no block may rely on
  a name defined elsewhere (no undefined ``X_train``), and none may release trivial
  sets or intervals (an ``UninformativeCalibrationWarning``, or a subclass, fails it).
- A percentage quoted in the prose right after a snippet (before the next code block or
  heading) is one the snippet printed (as a fraction, rounded): the README's numbers
  come from the run, and a change of the library that changes them fails here.
- The quick start is exactly two commands after cloning, and the test command is the
  one ``.ci/run`` extracts (the fast tests, on every core); ``.ci/run`` runs the slow
  tests in a step of its own.
- Runtime dependencies take floors only (installing never downgrades a newer release),
  and the README's "Dependencies" states the floors ``pyproject.toml`` declares (the
  ones CI's oldest-versions environment pins).
"""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYTHON_BLOCKS = re.findall(r"^```python\n(.*?)^```", README, re.S | re.M)

#: Runs a snippet file with every warning shown once per place; prints a marker line
#: on stderr when a warning is an UninformativeCalibrationWarning (by class name, so the
#: runner imports nothing of the package before the snippet does).
RUNNER = """
import sys, warnings
warnings.simplefilter("default")
_show = warnings.showwarning
def _marked(message, category, *args, **kwargs):
    _show(message, category, *args, **kwargs)
    if any(c.__name__ == "UninformativeCalibrationWarning" for c in category.__mro__):
        print("README-SNIPPET: uninformative release", file=sys.stderr)
warnings.showwarning = _marked
path = sys.argv[1]
source = open(path, encoding="utf-8").read()
exec(compile(source, path, "exec"), {"__name__": "__main__"})
"""
MARKER = "README-SNIPPET: uninformative release"


def _run(source: str, directory: Path) -> subprocess.CompletedProcess:
    snippet = directory / "snippet.py"
    snippet.write_text(source, encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-c", RUNNER, str(snippet)],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_readme_has_python_snippets():
    assert len(PYTHON_BLOCKS) >= 4  # classification, regression, federated, cards


@pytest.mark.slow
@pytest.mark.parametrize(
    "source", PYTHON_BLOCKS, ids=[f"block{i + 1}" for i in range(len(PYTHON_BLOCKS))]
)
def test_readme_snippet_runs_alone_and_is_informative(source, tmp_path):
    done = _run(source, tmp_path)
    assert done.returncode == 0, f"the snippet fails on its own:\n{source}\n{done.stderr}"
    assert MARKER not in done.stderr, f"the snippet releases trivial output:\n{done.stderr}"
    unprinted = _percentages_not_printed(_prose_after(source), done.stdout)
    assert not unprinted, (
        f"the prose after the snippet quotes {unprinted}%, which the snippet does not print "
        f"(as fractions):\n{done.stdout}"
    )


def _prose_after(source: str) -> str:
    """The README's text after the code block ``source``, up to the next block or heading."""
    after = README.split(source, 1)[1].split("```\n", 1)[1]
    return re.split(r"^```|^#", after, maxsplit=1, flags=re.M)[0]


def _percentages_not_printed(prose: str, printed: str) -> list[str]:
    quoted = re.findall(r"(\d+(?:\.\d+)?)%", prose)
    fractions = {round(100 * float(x), 6) for x in re.findall(r"\d*\.\d+", printed)}
    rounded = {round(f) for f in fractions} | fractions
    return [q for q in quoted if float(q) not in rounded]


def test_quoted_percentages_must_be_printed():
    assert _percentages_not_printed("covers 98% and 78%", "[0.98, 0.781]") == []
    assert _percentages_not_printed("covers 98% and 77%", "[0.98, 0.781]") == ["77"]
    assert "covers the majority class" in _prose_after(
        next(block for block in PYTHON_BLOCKS if "for mondrian in" in block)
    )


def test_runner_flags_an_uninformative_release(tmp_path):
    """The marker fires for the warning and its subclasses, and only for them."""
    source = (
        "import warnings\n"
        "class UninformativeCalibrationWarning(UserWarning): pass\n"
        "class InfeasibleCalibrationWarning(UninformativeCalibrationWarning): pass\n"
        "warnings.warn('all labels', InfeasibleCalibrationWarning)\n"
    )
    assert MARKER in _run(source, tmp_path).stderr
    assert MARKER not in _run("import warnings\nwarnings.warn('other')\n", tmp_path).stderr
    assert _run("print(X_train)\n", tmp_path).returncode != 0


def test_quick_start_is_two_commands_and_ci_runs_the_second():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^```bash\n(.*?)^```", quick_start, re.S | re.M)
    assert len(commands) == 2 and all(len(c.strip().splitlines()) == 1 for c in commands)
    install_and_demo, install_and_test = (c.strip() for c in commands)
    assert install_and_demo.endswith("-m privconf_sklearn demo")
    marked = README.split("<!-- ci:test-command -->\n```bash\n", 1)[1].split("\n", 1)[0]
    assert marked == install_and_test
    assert install_and_test.endswith('-m pytest -n auto -m "not slow"')
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "ci:test-command" in ci and 'bash -c "$cmd"' in ci
    # CI still runs every test: the slow ones in a step of their own.
    assert re.search(r"^\.venv/bin/python -m pytest .*-m slow", ci, re.M)


def _runtime_requirements() -> list[str]:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = re.search(r"^dependencies = \[(.*?)^\]", text, re.S | re.M)
    assert block, "pyproject.toml has no dependencies list"
    return re.findall(r'^\s*"([^"]+)"', block.group(1), re.M)


def test_runtime_dependencies_have_floors_and_no_caps():
    """Installing the package never downgrades a dependency; CI pins these floors."""
    requirements = _runtime_requirements()
    assert {re.split(r"[<>=!~ ]", r)[0] for r in requirements} >= {"scikit-learn", "diffprivlib"}
    for requirement in requirements:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+>=[0-9][0-9.]*", requirement), (
            f"{requirement!r}: runtime dependencies take a floor only (no upper bound, so "
            "that installing this package never downgrades a newer release)"
        )


def test_readme_states_the_floors_pyproject_declares():
    dependencies = README.split("## Dependencies", 1)[1].split("\n## ", 1)[0]
    for requirement in _runtime_requirements():
        name, floor = requirement.split(">=")
        assert f"{name} >= {floor}" in dependencies, f"README Dependencies: {name} >= {floor}"


@pytest.mark.slow
def test_regression_paragraph_numbers_come_from_the_run():
    """The widths the README quotes for the regression example, over the privacy noise
    of seeds 0 to 399 (P-COQS and ExponQ) and for split conformal, recomputed."""
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import train_test_split

    from privconf_sklearn import PrivateConformalRegressor
    from privconf_sklearn.mechanisms import PCOQS, ExponQ, SplitConformal
    from privconf_sklearn.metrics import mean_interval_width

    X, y = load_diabetes(return_X_y=True)
    X_train, X_rest, y_train, y_rest = train_test_split(X, y, train_size=0.3, random_state=0)
    X_cal, X_test, y_cal, _ = train_test_split(X_rest, y_rest, train_size=0.7, random_state=0)
    model = LinearRegression().fit(X_train, y_train)

    def widths(mechanism, seeds):
        found = []
        for seed in seeds:
            pcr = PrivateConformalRegressor(
                model, mechanism=mechanism, alpha=0.1, score_bounds=(0, 350), random_state=seed
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pcr.fit_calibrate(X_cal, y_cal)
            found.append(mean_interval_width(pcr.predict_interval(X_test)))
        return np.array(found)

    split = widths(SplitConformal(), [0])[0]
    pcoqs = widths(PCOQS(epsilon=1.0, delta=1e-5), range(400))
    expon = widths(ExponQ(epsilon=1.0), range(400))
    quoted = {
        "split": round(split),
        "pcoqs median": round(np.median(pcoqs)),
        "pcoqs mean": round(pcoqs.mean()),
        "pcoqs p95 above": int(np.percentile(pcoqs, 95) // 10 * 10),
        "pcoqs widest": round(pcoqs.max()),
        "expon mean": round(expon.mean()),
        "expon median": round(np.median(expon)),
        "expon p95": round(np.percentile(expon, 95)),
    }
    assert quoted == {
        "split": 193,
        "pcoqs median": 198,
        "pcoqs mean": 227,
        "pcoqs p95 above": 390,
        "pcoqs widest": 657,
        "expon mean": 223,
        "expon median": 214,
        "expon p95": 253,
    }
