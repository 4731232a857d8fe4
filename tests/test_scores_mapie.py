"""APS and RAPS against MAPIE 1.x on load_digits (MAPIE has both scores).

MAPIE's APS and RAPS calibrate randomised scores ``above + (1 - u) p_y`` (plus, for RAPS,
``lambda * max(0, rank - k)`` with ``k`` and ``lambda`` chosen on a split of the
calibration data). Ours with the uniforms ``U = 1 - u`` give the same scores, and at
MAPIE's threshold our non-randomised sets are MAPIE's ``include_last_label=False`` sets
(MAPIE then adds the most likely label to an empty set). Reading MAPIE's fitted
``k_star``, ``lambda_star``, ``quantiles_``, ``conformity_scores_`` and its split is the
only way to compare: MAPIE chooses them internally.
"""

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedShuffleSplit

from privconf_sklearn.scores import APS, RAPS

mapie_classification = pytest.importorskip("mapie.classification")
mapie_scores = pytest.importorskip("mapie.conformity_scores")

SEED = 3


class FixedUniforms(np.random.RandomState):
    """A random state whose uniforms are given (the randomised scores' only draw)."""

    def __init__(self, values):
        super().__init__(0)
        self.values = np.asarray(values, dtype=float)

    def uniform(self, low=0.0, high=1.0, size=None):
        return self.values[: int(np.prod(size))].reshape(size)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(0).permutation(len(y))
    X, y = X[order] / 16.0, y[order]
    model = LogisticRegression(max_iter=2000).fit(X[:800], y[:800])
    return model, X[800:1400], y[800:1400], X[1400:]


def _conformalize(model, X_cal, y_cal, score):
    return mapie_classification.SplitConformalClassifier(
        estimator=model,
        confidence_level=0.9,
        conformity_score=score,
        prefit=True,
        random_state=SEED,
    ).conformalize(X_cal, y_cal)


def _with_top_label_if_empty(sets, proba):
    sets = sets.copy()
    empty = ~sets.any(axis=1)
    sets[np.flatnonzero(empty), proba[empty].argmax(axis=1)] = True
    return sets


def test_randomised_aps_scores_and_sets_match_mapie(digits):
    model, X_cal, y_cal, X_test = digits
    mapie = _conformalize(model, X_cal, y_cal, "aps")
    _, mapie_sets = mapie.predict_set(X_test, conformity_score_params={"include_last_label": False})
    fitted = mapie._mapie_classifier
    u = np.random.RandomState(SEED).uniform(size=len(y_cal))
    ours = APS(randomized=True).conformity_scores(
        model.predict_proba(X_cal), y_cal, random_state=FixedUniforms(1.0 - u)
    )
    np.testing.assert_allclose(ours, fitted.conformity_scores_.ravel(), rtol=0, atol=1e-15)
    threshold = float(np.ravel(fitted.conformity_score_function_.quantiles_)[0])
    proba = model.predict_proba(X_test)
    sets = _with_top_label_if_empty(APS().predict_set(proba, threshold), proba)
    assert np.array_equal(sets, mapie_sets[:, :, 0])


def test_raps_scores_and_sets_match_mapie(digits):
    model, X_cal, y_cal, X_test = digits
    mapie = _conformalize(model, X_cal, y_cal, mapie_scores.RAPSConformityScore())
    _, mapie_sets = mapie.predict_set(X_test, conformity_score_params={"include_last_label": False})
    function = mapie._mapie_classifier.conformity_score_function_
    k_reg = int(np.ravel(function.k_star)[0])
    lambda_ = float(np.ravel([function.lambda_star])[0])
    threshold = float(np.ravel(function.quantiles_)[0])
    # MAPIE's calibration rows: the part its RAPS split keeps (test_size=None -> 0.1).
    kept, _ = next(
        StratifiedShuffleSplit(n_splits=1, test_size=function.size_raps, random_state=SEED).split(
            X_cal, y_cal
        )
    )
    u = np.random.RandomState(SEED).uniform(size=kept.size)
    ours = RAPS(k_reg=k_reg, lambda_=lambda_, randomized=True).conformity_scores(
        model.predict_proba(X_cal[kept]), y_cal[kept], random_state=FixedUniforms(1.0 - u)
    )
    regularised = mapie._mapie_classifier.conformity_scores_.ravel() + np.maximum(
        lambda_ * (function.cutoff - k_reg), 0
    )
    np.testing.assert_allclose(ours, regularised, rtol=0, atol=1e-15)
    proba = model.predict_proba(X_test)
    raps = RAPS(k_reg=k_reg, lambda_=lambda_)
    sets = _with_top_label_if_empty(raps.predict_set(proba, threshold), proba)
    assert np.array_equal(sets, mapie_sets[:, :, 0])
