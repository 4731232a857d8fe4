"""No silent trivial output: min_informative_samples and the readable Calibration record."""

import warnings

import numpy as np
import pytest

from privconf_sklearn.mechanisms import (
    DPAPS,
    PCOQS,
    CoverageCertificate,
    ExponQ,
    QuantileMechanism,
    SplitConformal,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.privacy import PrivacyGuarantee

CENTRAL = [
    SplitConformal(),
    ExponQ(1.0),
    ExponQ(0.5, scaling="paper"),
    ExponQ(2.0, scaling="monotone", n_bins=500),
    PCOQS(rho=0.5),
    PCOQS(epsilon=1.0, delta=1e-5, inflated=True),
    DPAPS(1.0),
    DPAPS(2.0, n_bins=20),
]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", CENTRAL, ids=repr)
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3])
def test_min_informative_samples_is_the_feasibility_boundary(mechanism, alpha):
    n = mechanism.min_informative_samples(alpha)
    assert mechanism.coverage_certificate(n, alpha).feasible
    assert all(not mechanism.coverage_certificate(m, alpha).feasible for m in range(1, n))


@pytest.mark.parametrize("mechanism", CENTRAL[1:], ids=repr)
def test_below_the_minimum_the_release_is_infeasible_and_flagged(mechanism):
    n = mechanism.min_informative_samples(0.1)
    scores = np.random.default_rng(0).uniform(size=n - 1)
    with pytest.warns(UserWarning, match=str(n)) as record:
        calibration = mechanism.calibrate(scores, 0.1, random_state=0)
    assert type(record[0].message).__name__ == "InfeasibleCalibrationWarning"
    assert not calibration.informative and not calibration.feasible
    assert str(n) in calibration.reason  # says from which n it would work


class _FeasibleFrom(QuantileMechanism):
    """A stub mechanism feasible from a given size on: exercises the generic search."""

    def __init__(self, smallest=1234):
        self.smallest = smallest

    def _privacy_guarantee(self, params):
        return PrivacyGuarantee.no_privacy()

    def _coverage_certificate(self, params, n_samples, alpha):
        return CoverageCertificate(1 - alpha, feasible=n_samples >= self.smallest)

    def _calibrate(self, params, scores, alpha, groups, noise):
        raise NotImplementedError


@pytest.mark.parametrize("smallest", [1, 2, 3, 1234, 2**40 + 7])
def test_generic_search_finds_the_boundary(smallest):
    assert _FeasibleFrom(smallest).min_informative_samples(0.1) == smallest


def test_generic_search_gives_up_with_a_clear_error():
    with pytest.raises(ValueError, match="no calibration size up to"):
        _FeasibleFrom(10**16).min_informative_samples(0.1)
    with pytest.raises(ValueError, match="alpha"):
        _FeasibleFrom().min_informative_samples(1.5)


def test_calibration_repr_is_short_and_readable():
    scores = np.random.default_rng(0).beta(2.0, 5.0, size=3000)
    calibration = DPAPS(1.0).calibrate(scores, 0.1, random_state=0)
    text = repr(calibration)
    assert str(calibration) == text
    lines = text.splitlines()
    assert lines[0] == "Calibration(DPAPS)"
    assert len(lines) <= 10 and max(len(line) for line in lines) <= 130
    assert f"threshold   {calibration.threshold:.4g}" in text
    assert "alpha       0.1, n_samples = 3000" in text
    assert "pure epsilon = 1 (replace-one and add/remove)" in text
    assert "informative=True, feasible=True" in text
    assert "owner_diagnostics  3 entries, not private" in text
    assert str(calibration.owner_diagnostics["grid_threshold"]) not in text


def test_calibration_repr_of_a_trivial_release_says_why():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        calibration = PCOQS(rho=0.5, inflated=True).calibrate(np.ones(50), 0.1)
    text = repr(calibration)
    assert "top of the range" in text
    assert "informative=False, feasible=False" in text
    assert "reason      the inflated target rank" in text
    assert "zCDP rho = 0.5" not in text  # nothing was read: zero privacy loss
    assert "pure epsilon = 0" in text


@pytest.mark.parametrize(
    "mechanism",
    [ExponQ(epsilon=1e-300), DPAPS(epsilon=1e-300)],
    ids=["ExponQ", "DPAPS"],
)
def test_no_feasible_size_at_all_gives_a_trivial_release_not_an_error(mechanism):
    """A budget no calibration size can serve: calibrate still releases the top of the
    range with the warning (the message says no size suffices), and the planning method's
    error names the mechanism's budget and the level."""
    scores = np.random.default_rng(0).uniform(size=500)
    with pytest.warns(UninformativeCalibrationWarning, match="[Mm]ore than 1e\\+15"):
        calibration = mechanism.calibrate(scores, 0.1, random_state=0)
    assert not calibration.informative and calibration.threshold == 1.0
    with pytest.raises(ValueError, match=r"epsilon=1e-300\) at alpha = 0\.1"):
        mechanism.min_informative_samples(0.1)


def test_every_set_full_under_an_informative_threshold_blames_the_model():
    """A model that does not separate the labels (a prior-only dummy on balanced classes)
    puts every label in every set although the released threshold is informative: the
    warning says so instead of blaming the release."""
    from sklearn.dummy import DummyClassifier

    from privconf_sklearn import PrivateConformalClassifier, UninformativePredictionWarning

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(400, 3)), np.tile([0, 1], 200)
    model = DummyClassifier(strategy="prior").fit(X, y)
    pcc = PrivateConformalClassifier(model, mechanism=SplitConformal(), alpha=0.1)
    pcc.fit_calibrate(X, y)
    assert pcc.calibration_.informative
    with pytest.warns(UninformativePredictionWarning) as record:
        assert pcc.predict_set(X[:5]).all()
    message = str(record[0].message)
    assert "the calibrated threshold is informative, but the model's scores" in message
    assert "released" not in message and "  " not in message
