"""Helpers for the scikit-learn common checks of the conformal estimators."""

from scipy import sparse
from sklearn.utils import check_array

from privconf_sklearn.mechanisms import ExponQ


class CountingExponQ(ExponQ):
    """ExponQ that records whether each release read the data and was informative.

    The record is per process (each pytest-xdist worker has its own): a test empties
    it before the check whose releases it inspects.
    """

    releases: list = []

    def calibrate(self, scores, alpha, *, groups=None, random_state=None):
        calibration = super().calibrate(scores, alpha, groups=groups, random_state=random_state)
        CountingExponQ.releases.append(calibration.privacy.epsilon > 0 and calibration.informative)
        return calibration


class SignOfFirstFeature:
    """A public grouping of the rows: whether the first feature is positive.

    A module-level class (estimators holding it pickle) with a fixed ``repr``: the test
    ids of ``parametrize_with_checks`` contain the estimators' reprs, and a function's
    repr holds its memory address, which differs between pytest-xdist workers (they
    would then refuse to run, having collected different tests).
    """

    def __call__(self, X):
        X = check_array(X, accept_sparse="csr", ensure_all_finite=False)
        column = X[:, [0]].toarray() if sparse.issparse(X) else X[:, [0]]
        return column.ravel() > 0

    def __repr__(self):
        return "sign_of_first_feature"


sign_of_first_feature = SignOfFirstFeature()


def assert_private_path_ran(estimator, check, private_path):
    """After the common check ``check`` of ``estimator``: if they are the pair
    ``private_path`` names (an estimator with a CountingExponQ mechanism, and the name of
    a check that trains it on enough rows), some release was private and informative:
    the common checks really exercise the private path, not only its fallbacks.

    One fixed pair, checked inside its own test, so that it holds whichever
    pytest-xdist worker runs that test.
    """
    expected_estimator, expected_check = private_path
    if getattr(check, "func", check).__name__ != expected_check:
        return
    if repr(estimator) != repr(expected_estimator):
        return
    assert isinstance(expected_estimator.mechanism, CountingExponQ)
    assert any(CountingExponQ.releases), f"no private, informative release in {expected_check}"
