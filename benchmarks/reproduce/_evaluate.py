"""Coverage, set size and singleton rate of many thresholds on one test set at once.

For set-valued predictions ``C_t(x) = {c : s_c(x) <= t}`` (LAC and every score whose
sets are sublevel sets), each metric at a threshold ``t`` is a count of scores at most
``t`` in a sorted array, so all the thresholds released in one run (every method,
budget and level) are evaluated by a few ``np.searchsorted`` calls instead of
building one boolean set matrix per threshold (paper 002 Def. 3 metrics).
"""

from __future__ import annotations

import numpy as np

__all__ = ["SetMetrics"]


class SetMetrics:
    """Metrics of ``{c : scores[i, c] <= t}`` on a fixed test set, vectorised in ``t``.

    Parameters
    ----------
    class_scores : ndarray of shape (n_test, n_classes)
        Conformity score of every class for every test point.
    labels : ndarray of shape (n_test,)
        Column index of each test point's true class.
    """

    def __init__(self, class_scores: np.ndarray, labels: np.ndarray):
        n_test, n_classes = class_scores.shape
        self.n_test = n_test
        self._true = np.sort(class_scores[np.arange(n_test), labels])
        self._all = np.sort(class_scores, axis=None)
        by_row = np.sort(class_scores, axis=1)
        self._smallest = np.sort(by_row[:, 0])
        self._second = np.sort(by_row[:, 1]) if n_classes > 1 else np.full(n_test, np.inf)

    def __call__(self, thresholds) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Coverage, mean set size and singleton rate at each threshold.

        A set has exactly one label when its smallest score is at most ``t`` and its
        second smallest is not.
        """
        t = np.asarray(thresholds, dtype=np.float64)
        n = self.n_test
        coverage = np.searchsorted(self._true, t, side="right") / n
        size = np.searchsorted(self._all, t, side="right") / n
        singleton = (
            np.searchsorted(self._smallest, t, side="right")
            - np.searchsorted(self._second, t, side="right")
        ) / n
        return coverage, size, singleton
