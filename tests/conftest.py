import sys
import warnings
from pathlib import Path

import pytest

# ``tests`` is a package (``from ._stats import ...``); also allow ``import _stats``.
sys.path.insert(0, str(Path(__file__).resolve().parent))

from ._environment import DIFFPRIVLIB, DIFFPRIVLIB_MISSING


@pytest.fixture
def dp():
    """The diffprivlib module, or a skip saying why it cannot be used here."""
    if DIFFPRIVLIB is None:
        pytest.skip(DIFFPRIVLIB_MISSING)
    return DIFFPRIVLIB


@pytest.fixture(autouse=True)
def _fresh_default_accountant():
    """Each test starts with a fresh diffprivlib default accountant.

    diffprivlib offers no public way to discard the process-wide default ledger, so the
    private class attribute is reset (and restored afterwards).
    """
    if DIFFPRIVLIB is None:
        yield
        return
    accountant = DIFFPRIVLIB.accountant.BudgetAccountant
    previous = accountant._default
    accountant._default = None
    yield
    accountant._default = previous


@pytest.fixture
def quiet_privacy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
