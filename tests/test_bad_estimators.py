"""Something that is not a scikit-learn estimator is refused by name, in every wrapper.

``None``, a string, a number or a duck-typed model without scikit-learn tags used to
escape as scikit-learn's internal ``AttributeError`` (``'NoneType' object has no
attribute '__sklearn_tags__'``) from ``is_regressor`` / ``get_tags``.
"""

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.utils import get_tags
from sklearn.utils._param_validation import InvalidParameterError

from privconf_sklearn import (
    PrivateConformalClassifier,
    PrivateConformalRegressor,
    PrivateRiskControlClassifier,
    QuantilePair,
)
from privconf_sklearn.mechanisms import ExponQ, SplitCRC


class DuckModel:
    """Has fit and predict, but no scikit-learn tags (not a BaseEstimator)."""

    def fit(self, X, y):
        return self

    def predict(self, X):
        return np.zeros(len(X))


def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    return X, (X[:, 0] > 0).astype(int)


WRAPPERS = {
    "classifier": lambda e: PrivateConformalClassifier(e, mechanism=ExponQ(1.0), alpha=0.1),
    "regressor": lambda e: PrivateConformalRegressor(
        e, mechanism=ExponQ(1.0), alpha=0.1, score_bounds=(0.0, 5.0)
    ),
    "risk control": lambda e: PrivateRiskControlClassifier(e, mechanism=SplitCRC(), alpha=0.1),
}


@pytest.mark.parametrize(
    "estimator", [None, "logistic", 3.0, DuckModel()], ids=["None", "str", "float", "duck"]
)
@pytest.mark.parametrize("kind", sorted(WRAPPERS))
def test_a_non_estimator_is_refused_by_name_and_nothing_is_fitted(kind, estimator):
    X, y = _data()
    wrapper = WRAPPERS[kind](estimator)
    get_tags(wrapper)  # tags, repr and clone do not crash before fit
    repr(wrapper)
    with pytest.raises(InvalidParameterError, match="The 'estimator' parameter of Private"):
        wrapper.fit_calibrate(X, y)
    with pytest.raises(InvalidParameterError, match="scikit-learn estimator"):
        wrapper.fit(X, y)
    assert not hasattr(wrapper, "calibration_")


@pytest.mark.parametrize("member", ["lower", "upper"])
def test_a_quantile_pair_member_that_is_not_an_estimator_is_refused_by_name(member):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = X[:, 0] + rng.normal(size=200)
    model = LinearRegression().fit(X, y)
    pair = QuantilePair(None, model) if member == "lower" else QuantilePair(model, None)
    get_tags(pair)
    wrapper = PrivateConformalRegressor(
        pair, mechanism=ExponQ(1.0), alpha=0.1, conformity_score="cqr", score_bounds=(0, 10)
    )
    with pytest.raises(InvalidParameterError, match=f"The '{member}' parameter of QuantilePair"):
        wrapper.fit_calibrate(X, y)
    with pytest.raises(InvalidParameterError, match=f"'{member}'"):
        pair.fit(X, y)
