"""Simulated data sets of the papers' experiments."""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

__all__ = ["make_two_gaussians"]


def make_two_gaussians(n_samples: int = 10000, *, random_state=None):
    """Binary classification data of paper 002 Sec. 5.1 (Romanus and Molinari).

    Eight features; class 0 ~ N(0.8 * 1, 7 I), class 1 ~ N(-1 * 1, 8 I); balanced
    classes (``n_samples // 2`` of each, the remainder to class 0), rows shuffled. The
    small difference in covariances makes the Bayes boundary slightly non-linear;
    the paper's DP Gaussian naive Bayes (epsilon = 2) reaches about 75% accuracy.

    Parameters
    ----------
    n_samples : int, default=10000
        Number of rows.
    random_state : None, int or RandomState, default=None
        Seed of the simulation (not privacy noise).

    Returns
    -------
    X : ndarray of shape (n_samples, 8)
    y : ndarray of shape (n_samples,), values in {0, 1}
    """
    if not isinstance(n_samples, int | np.integer) or n_samples < 2:
        raise ValueError(f"n_samples must be an integer >= 2; got {n_samples!r}.")
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
