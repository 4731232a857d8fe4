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
