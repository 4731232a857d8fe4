"""The exact privacy-loss helper of the privacy tests (tests/_privacy.py).

Every exact privacy check goes through it, so it must not let an unchecked output
through: impossible-on-both outputs are equal, impossible-on-one outputs are an infinite
loss, and a nan is an error, never a value ``max`` silently drops.
"""

import math

import numpy as np
import pytest

from ._privacy import dict_privacy_loss, privacy_loss

INF = math.inf


def test_largest_absolute_log_ratio():
    assert privacy_loss(np.log([0.5, 0.25, 0.25]), np.log([0.25, 0.5, 0.25])) == pytest.approx(
        math.log(2.0)
    )


def test_outputs_impossible_on_both_sides_are_equal():
    assert privacy_loss([-INF, np.log(0.5), np.log(0.5)], [-INF, np.log(0.25), np.log(0.75)]) == (
        pytest.approx(math.log(2.0))
    )
    assert privacy_loss([-INF, -INF], [-INF, -INF]) == 0.0


@pytest.mark.parametrize("swap", [False, True])
def test_an_output_impossible_on_one_side_only_is_an_infinite_loss(swap):
    first, second = [-INF, 0.0], [np.log(1e-300), np.log1p(-1e-300)]
    if swap:
        first, second = second, first
    assert privacy_loss(first, second) == INF


def test_the_pair_the_old_check_dropped_is_now_counted():
    """max(worst, np.max(np.abs(p - q))) was max(worst, nan) = worst: the pair vanished."""
    p, q = np.array([-INF, np.log(0.9), np.log(0.1)]), np.array([-INF, np.log(0.1), np.log(0.9)])
    with np.errstate(invalid="ignore"):
        assert max(0.0, float(np.max(np.abs(p - q)))) == 0.0  # the silent drop
    assert privacy_loss(p, q) == pytest.approx(math.log(9.0))


@pytest.mark.parametrize("bad", [np.nan, INF])
def test_nan_or_positive_infinity_is_an_error(bad):
    with pytest.raises(AssertionError, match="log-probability"):
        privacy_loss([bad, 0.0], [0.0, 0.0])
    with pytest.raises(AssertionError, match="log-probability"):
        privacy_loss([0.0, 0.0], [0.0, bad])


def test_different_outputs_are_an_error():
    with pytest.raises(AssertionError, match="different outputs"):
        privacy_loss([0.0], [0.0, -INF])


def test_dictionaries_missing_outputs_have_probability_zero():
    assert dict_privacy_loss({"a": 0.5, "b": 0.5}, {"a": 0.25, "b": 0.75}) == pytest.approx(
        math.log(2.0)
    )
    assert dict_privacy_loss({"a": 1.0}, {"a": 0.5, "b": 0.5}) == INF
    assert dict_privacy_loss({"a": 1.0, "b": 0.0}, {"a": 1.0}) == 0.0
