"""LossCurve: losses rounded up exactly, non-increasing envelopes, curves that add up."""

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privconf_sklearn.mechanisms import LossCurve
from privconf_sklearn.mechanisms._loss_curve import (
    MAX_CURVE_UNITS,
    MAX_RESOLUTION,
    loss_units,
    max_resolution,
)

bounds = st.sampled_from([1.0, 0.3, 5.0, 1e-3, 7.25, 1e6])
resolutions = st.sampled_from([1, 3, 60, 720720, 2**20, MAX_RESOLUTION])


@settings(max_examples=300, deadline=None)
@given(bound=bounds, resolution=resolutions, data=st.data())
def test_units_are_the_exact_ceiling(bound, resolution, data):
    """``ceil(Q L / B)`` in exact rationals, for random losses and exact multiples."""
    k = data.draw(st.integers(0, resolution))
    fraction = data.draw(st.floats(0, 1, allow_nan=False))
    losses = np.array(
        [bound * fraction, k * bound / resolution, bound, 0.0, np.nextafter(bound, 0)]
    )
    units = loss_units(losses, bound, resolution)
    for value, unit in zip(losses.tolist(), units.tolist(), strict=True):
        exact = Fraction(value) * resolution / Fraction(bound)
        assert unit == -((-exact.numerator) // exact.denominator)  # ceil, exactly


def test_units_refuse_values_outside_the_bound():
    with pytest.raises(ValueError, match=r"\[0, 1.0\]; got \[-0.5, 1.5, nan\]"):
        loss_units(np.array([0.2, 1.5, -0.5, np.nan]), 1.0, 8)


def test_envelope_and_owner_counts():
    units = np.array([[2, 3, 0], [3, 1, 1], [1, 1, 0]])
    curve = LossCurve.from_units(units, 3)
    assert curve.sums.tolist() == [3 + 3 + 1, 3 + 1 + 1, 0 + 1 + 0]
    assert curve.owner_diagnostics == {"n_rows_loss_increasing": 1, "n_rows_top_loss_positive": 1}
    assert curve.curve.tolist() == [9, 7, 5, 1]


def test_curves_of_blocks_add_up():
    rng = np.random.default_rng(0)
    losses = np.sort(rng.uniform(size=(50, 7)), axis=1)[:, ::-1]
    losses[:, -1] = 0
    whole = LossCurve.from_losses(losses, resolution=2**16)
    parts = LossCurve.from_losses(losses[:20], resolution=2**16) + LossCurve.from_losses(
        losses[20:], resolution=2**16
    )
    assert np.array_equal(whole.sums, parts.sums) and parts.n_samples == 50


def test_resolution_keeps_integers_exact():
    for n in [1, 10**6, 10**8, 10**12]:
        q = max_resolution(n)
        assert q <= MAX_RESOLUTION and (n + 1) * q <= MAX_CURVE_UNITS
        assert q & (q - 1) == 0  # a power of two: the largest that fits
        assert q == MAX_RESOLUTION or 2 * q * (n + 1) > MAX_CURVE_UNITS
    with pytest.raises(ValueError, match="too large"):
        max_resolution(MAX_CURVE_UNITS)


@pytest.mark.parametrize(
    "sums", [np.array([3, 4]), np.array([-1]), np.array([1.0]), np.array([], dtype=np.int64)]
)
def test_invalid_curves_are_refused(sums):
    with pytest.raises(ValueError, match="sums"):
        LossCurve(sums, 2, 2, 1.0)
