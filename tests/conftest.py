import sys
import warnings
from pathlib import Path

import pytest
from diffprivlib.accountant import BudgetAccountant

# ``tests`` is a package (``from ._stats import ...``); also allow ``import _stats``.
sys.path.insert(0, str(Path(__file__).resolve().parent))


@pytest.fixture(autouse=True)
def _fresh_default_accountant():
    """Each test starts with a fresh diffprivlib default accountant."""
    previous = BudgetAccountant._default
    BudgetAccountant._default = None
    yield
    BudgetAccountant._default = previous


@pytest.fixture
def quiet_privacy_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
