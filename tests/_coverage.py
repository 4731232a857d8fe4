"""A derived lower limit for the coverage of a fitted estimator on fresh test rows.

Given the calibration set, test rows drawn from the same distribution are covered
independently with probability ``F(T)``, ``F`` the distribution function of their score
and ``T`` the released threshold. ``T`` depends on the calibration data, but the
Dvoretzky-Kiefer-Wolfowitz inequality (Massart's constant) holds uniformly in ``T``:
``F(T) >= F_n(T) - eps`` for every ``T`` with probability ``>= 1 - 2 exp(-2 n eps^2)``,
``F_n`` the empirical distribution function of the ``n`` calibration scores. The number
of covered test rows is then at least a binomial quantile at ``F_n(T) - eps``. Half the
false-failure budget goes to each step.
"""

from __future__ import annotations

import math

import numpy as np

from ._stats import FALSE_FAILURE, binomial_lower_limit


def covered_count_lower_limit(estimator, X_cal, y_cal, n_test: int) -> int:
    """Lower limit for the number of covered test rows of a fitted conformal estimator.

    Parameters
    ----------
    estimator : PrivateConformalClassifier or PrivateConformalRegressor
        Calibrated on ``(X_cal, y_cal)``, without Mondrian groups.
    X_cal, y_cal : array-like
        Its calibration data.
    n_test : int
        Number of fresh test rows from the same distribution.
    """
    outputs = estimator.score_.estimator_outputs(estimator.estimator_, X_cal)
    if hasattr(estimator, "classes_"):
        labels = np.searchsorted(estimator.classes_, np.asarray(y_cal))
    else:
        labels = np.asarray(y_cal, dtype=np.float64)
    scores = estimator.score_.conformity_scores(outputs, labels)
    n = scores.shape[0]
    half = FALSE_FAILURE / 2
    dkw = math.sqrt(math.log(2.0 / half) / (2.0 * n))
    calibration_coverage = float(np.mean(scores <= estimator.threshold_))
    return binomial_lower_limit(n_test, max(0.0, calibration_coverage - dkw), half)
