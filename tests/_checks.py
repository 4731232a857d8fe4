"""Helpers for the scikit-learn common checks of the conformal estimators."""

from scipy import sparse
from sklearn.utils import check_array

from privconf_sklearn.mechanisms import ExponQ


class CountingExponQ(ExponQ):
    """ExponQ that records whether each release read the data and was informative."""

    releases: list = []

    def calibrate(self, scores, alpha, *, groups=None, random_state=None):
        calibration = super().calibrate(scores, alpha, groups=groups, random_state=random_state)
        CountingExponQ.releases.append(calibration.privacy.epsilon > 0 and calibration.informative)
        return calibration


class _SignOfFirstFeature:
    """A public grouping of the rows (module level, so that estimators pickle).

    A callable object rather than a function: its ``repr`` (part of the test ids of the
    common checks) holds no memory address, so that every pytest-xdist worker collects
    the same ids.
    """

    __name__ = "sign_of_first_feature"

    def __call__(self, X):
        X = check_array(X, accept_sparse="csr", ensure_all_finite=False)
        column = X[:, [0]].toarray() if sparse.issparse(X) else X[:, [0]]
        return column.ravel() > 0

    def __repr__(self) -> str:
        return self.__name__


sign_of_first_feature = _SignOfFirstFeature()
