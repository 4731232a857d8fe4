import sys
import time
import warnings
from pathlib import Path

import pytest

try:
    import resource
except ImportError:  # Windows: no getrusage; the budget report counts this process only
    resource = None

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


# ----------------------------------------------------------- the fast tests' CPU budget
#: CPU seconds a test not marked ``slow`` may use (setup, call and teardown; this
#: process plus the subprocesses it waited for). CPU time, not wall time, so that a
#: loaded machine does not move a test across the line. Over it: mark the test
#: ``@pytest.mark.slow`` (docs/developer/ci.rst). Reported, never failed.
FAST_TEST_CPU_BUDGET = 1.0

_STARTED = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    if resource is None:
        return time.process_time()
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_STARTED] = _cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.when == "teardown" and _STARTED in item.stash:
        used = _cpu_seconds() - item.stash[_STARTED]
        # user_properties travel with the report from pytest-xdist workers.
        outcome.get_result().user_properties.append(("cpu_seconds", used))


class _CpuBudgetReport:
    """Collects the fast tests over the budget (in the controller under pytest-xdist)."""

    def __init__(self):
        self.over: list[tuple[float, str]] = []

    def pytest_runtest_logreport(self, report):
        if report.when != "teardown" or "slow" in report.keywords:
            return
        used = dict(report.user_properties).get("cpu_seconds", 0.0)
        if used > FAST_TEST_CPU_BUDGET:
            self.over.append((used, report.nodeid))

    def pytest_terminal_summary(self, terminalreporter):
        if not self.over:
            return
        terminalreporter.section("fast tests over the CPU budget")
        terminalreporter.line(
            f"{len(self.over)} test(s) not marked slow used more than "
            f"{FAST_TEST_CPU_BUDGET:g} CPU seconds: mark them @pytest.mark.slow or make "
            "them cheaper (docs/developer/ci.rst)."
        )
        for used, nodeid in sorted(self.over, reverse=True)[:30]:
            terminalreporter.line(f"{used:7.2f} s  {nodeid}")


def pytest_configure(config):
    config.pluginmanager.register(_CpuBudgetReport(), "cpu-budget-report")
