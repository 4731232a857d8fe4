import warnings

import pytest
from diffprivlib.accountant import BudgetAccountant


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
