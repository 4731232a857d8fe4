"""Simulated data sets of the papers' experiments."""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state

from ._param_validation import Interval, validate_params

__all__ = ["make_poisson_outliers", "make_two_gaussians"]

#: Largest number of rows a generator makes (bounded allocation: 10^7 rows of
#: ``make_two_gaussians`` are 640 MB).
MAX_ROWS = 10**7


def make_two_gaussians(n_samples: int = 10000, *, random_state=None):
    """Binary classification data of Romanus and Molinari (2025), Sec. 5.1.

    Eight features; class 0 ~ N(0.8 * 1, 7 I), class 1 ~ N(-1 * 1, 8 I); balanced
    classes (``n_samples // 2`` of each, the remainder to class 0), rows shuffled. The
    small difference in covariances makes the Bayes boundary slightly non-linear;
    the paper's DP Gaussian naive Bayes (epsilon = 2) reaches about 75% accuracy.

    Parameters
    ----------
    n_samples : int, default=10000
        Number of rows, in ``[2, 10**7]``.
    random_state : None, int or RandomState, default=None
        Seed of the simulation (not privacy noise).

    Returns
    -------
    X : ndarray of shape (n_samples, 8)
    y : ndarray of shape (n_samples,), values in {0, 1}
    """
    n_samples = validate_params(
        {"n_samples": [Interval(Integral, 2, MAX_ROWS, closed="both")]},
        {"n_samples": n_samples},
        "make_two_gaussians",
    )["n_samples"]
    rng = check_random_state(random_state)
    n1 = n_samples // 2
    n0 = n_samples - n1
    X = np.vstack(
        [
            rng.normal(0.8, np.sqrt(7.0), size=(n0, 8)),
            rng.normal(-1.0, np.sqrt(8.0), size=(n1, 8)),
        ]
    )
    y = np.r_[np.zeros(n0, dtype=np.int64), np.ones(n1, dtype=np.int64)]
    order = rng.permutation(n_samples)
    return X[order], y[order]


def make_poisson_outliers(n_samples: int = 2000, *, random_state=None):
    """Heteroscedastic regression data of Humbert et al. (2023), Sec. 5.1.

    After Romano et al. (2019).

    ``X ~ U[1, 5]`` (one feature) and
    ``Y | X ~ Pois(sin(X)^2 + 0.1) + 0.03 X eps_1 + 25 * 1{U < 0.01} eps_2`` with
    ``eps_1, eps_2`` standard Gaussian and ``U`` uniform: count noise whose level
    depends on ``X`` plus about 1% of large outliers.

    Parameters
    ----------
    n_samples : int, default=2000
        Number of rows, in ``[1, 10**7]``.
    random_state : None, int or RandomState, default=None
        Seed of the simulation (not privacy noise).

    Returns
    -------
    X : ndarray of shape (n_samples, 1)
    y : ndarray of shape (n_samples,)
    """
    n_samples = validate_params(
        {"n_samples": [Interval(Integral, 1, MAX_ROWS, closed="both")]},
        {"n_samples": n_samples},
        "make_poisson_outliers",
    )["n_samples"]
    rng = check_random_state(random_state)
    x = rng.uniform(1.0, 5.0, size=n_samples)
    counts = rng.poisson(np.sin(x) ** 2 + 0.1)
    noise = 0.03 * x * rng.normal(size=n_samples)
    outliers = 25.0 * (rng.uniform(size=n_samples) < 0.01) * rng.normal(size=n_samples)
    return x[:, None], counts + noise + outliers
