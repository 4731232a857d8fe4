"""Conformity scores: sets are exactly {y : score(x, y) <= threshold}."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from privconf_sklearn.scores import APS, LAC
from privconf_sklearn.scores.classification import _lac_cutoff


def _all_scores(score, proba, random_state=None):
    n, k = proba.shape
    return np.column_stack(
        [score.conformity_scores(proba, np.full(n, j), random_state=random_state) for j in range(k)]
    )


@st.composite
def probability_rows(draw):
    k = draw(st.integers(2, 6))
    n = draw(st.integers(1, 8))
    raw = draw(arrays(np.float64, (n, k), elements=st.floats(0, 10, allow_subnormal=False)))
    raw[:, 0] += 1e-3
    if draw(st.booleans()):
        raw = np.round(raw)  # ties
        raw[:, 0] += 1.0
    return raw / raw.sum(axis=1, keepdims=True)


@settings(max_examples=300, deadline=None)
@given(probability_rows(), st.floats(0, 1), st.sampled_from(["lac", "aps", "raps"]))
def test_sets_equal_scores_below_threshold(proba, threshold, kind):
    score = {"lac": LAC(), "aps": APS(), "raps": APS(randomized=True)}[kind]
    scores = _all_scores(score, proba, random_state=3)
    for t in (threshold, *np.unique(scores)):
        assert np.array_equal(score.predict_set(proba, t, random_state=3), scores <= t)


@settings(max_examples=500, deadline=None)
@given(st.floats(0, 1, exclude_max=True), st.floats(0, 1))
def test_lac_cutoff_is_exact(threshold, p):
    cutoff = _lac_cutoff(threshold)
    assert (p >= cutoff) == (1.0 - p <= threshold)


def test_aps_scores_in_unit_interval_and_last_label_scores_one():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(7), size=2000)
    scores = _all_scores(APS(), proba)
    assert ((scores >= 0) & (scores <= 1)).all()
    assert (scores[np.arange(2000), proba.argmin(axis=1)] == 1.0).all()
    assert APS().predict_set(proba, 1.0).all()
    assert LAC().predict_set(proba, 1.0).all()


def test_aps_ties_do_not_depend_on_class_order():
    proba = np.array([[0.4, 0.3, 0.3]])
    scores = _all_scores(APS(), proba)
    assert scores.tolist() == [[0.4, 1.0, 1.0]]
    assert APS().predict_set(proba, 0.9).tolist() == [[True, False, False]]


def test_randomised_aps_is_no_larger_than_aps():
    rng = np.random.default_rng(1)
    proba = rng.dirichlet(np.ones(5), size=500)
    plain = _all_scores(APS(), proba)
    randomised = _all_scores(APS(randomized=True), proba, random_state=0)
    assert (randomised <= plain + 1e-15).all()


def test_bad_randomized_parameter():
    with pytest.raises(ValueError, match="randomized must be a bool"):
        APS(randomized="yes").conformity_scores(np.array([[1.0, 0.0]]), np.array([0]))
