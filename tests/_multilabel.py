"""A quick multilabel data set and a known model for the risk-control tests."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin


def make_multilabel(n, n_labels=5, seed=0):
    """Gaussian features; label k is on when a noisy linear score exceeds 0.8, and the
    highest-scoring label is always on (MAPIE refuses rows without a label).

    scikit-learn's ``make_multilabel_classification`` samples row by row and takes tens
    of seconds for a few thousand rows on a loaded machine.
    """
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    scores = X @ rng.normal(size=(8, n_labels)) + rng.normal(scale=1.5, size=(n, n_labels))
    Y = (scores > 0.8).astype(int)
    Y[np.arange(n), np.argmax(scores, axis=1)] = 1
    return X, Y


def plan_of(mechanism, n, alpha, m, resolution, bound):
    """A risk-control mechanism's public plan for ``(n, alpha, m, Q, B)``, or None."""
    return mechanism._plan(mechanism._validated_params(), n, alpha, m, resolution, bound)


class SecondColumnProbability(ClassifierMixin, BaseEstimator):
    """A 'fitted' binary classifier: P(label 1 | x) is the second feature."""

    def fit(self, X, y):
        self.classes_ = np.array([0, 1])
        return self

    def predict_proba(self, X):
        p = np.asarray(X, dtype=np.float64)[:, 1]
        return np.column_stack([1.0 - p, p])

    def predict(self, X):
        return (np.asarray(X, dtype=np.float64)[:, 1] > 0.5).astype(int)
