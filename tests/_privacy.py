"""Exact privacy losses from exact output distributions.

A pure epsilon-DP check compares, output by output, the log-probabilities of two
neighbouring data sets. Two cases need care, and plain ``np.max(np.abs(p - q))`` gets
both wrong: an output impossible under both data sets gives ``-inf - -inf = nan``, and
``np.max`` of an array holding a nan is nan, which ``max(worst, nan)`` then silently
drops (the whole pair goes unchecked); an output possible under exactly one of them is
an infinite loss (pure DP fails), which must fail the test, not be skipped.
:func:`privacy_loss` makes both cases explicit.
"""

import math

import numpy as np


def privacy_loss(log_p, log_q) -> float:
    """``max_o |log P(o) - log Q(o)|`` over the outputs ``o`` of two exact distributions.

    Parameters
    ----------
    log_p, log_q : array-like of float
        Log-probabilities of the same outputs, in the same order.

    Returns
    -------
    float
        The largest absolute log-ratio over the outputs; outputs impossible under both
        (``-inf`` on both sides) contribute nothing (they are equal); an output
        impossible under exactly one side makes the loss ``inf``. 0 when no output is
        possible under either (two empty distributions compare equal).

    Raises
    ------
    AssertionError
        When the shapes differ, or a log-probability is nan or ``+inf`` (a bug in the
        distribution under test, never a value to skip).
    """
    log_p = np.asarray(log_p, dtype=float)
    log_q = np.asarray(log_q, dtype=float)
    assert log_p.shape == log_q.shape, f"different outputs: {log_p.shape} != {log_q.shape}"
    for side in (log_p, log_q):
        assert not np.isnan(side).any(), "a log-probability is nan"
        assert not np.isposinf(side).any(), "a log-probability is +inf"
    impossible_p, impossible_q = np.isneginf(log_p), np.isneginf(log_q)
    if (impossible_p != impossible_q).any():
        return math.inf
    possible = ~impossible_p
    if not possible.any():
        return 0.0
    return float(np.max(np.abs(log_p[possible] - log_q[possible])))


def dict_privacy_loss(first: dict, second: dict) -> float:
    """:func:`privacy_loss` of two ``{output: probability}`` distributions.

    Outputs missing from one dictionary have probability 0 there.
    """
    outputs = list({**first, **second})
    with np.errstate(divide="ignore"):  # log(0) = -inf is the intended value
        log_p = np.log([first.get(output, 0.0) for output in outputs])
        log_q = np.log([second.get(output, 0.0) for output in outputs])
    return privacy_loss(log_p, log_q)


def discrete_laplace_at_least(k: int, epsilon: float) -> float:
    """``P(Z >= k)`` for the size noise, ``P(Z = z)`` proportional to ``exp(-epsilon |z|)``."""
    rho = math.exp(-epsilon)
    return rho**k / (1 + rho) if k >= 0 else 1 - rho ** (1 - k) / (1 + rho)


def private_size_distribution(n_g: int, n_cap: int, offset: int, epsilon: float) -> dict:
    """``{m: p}`` of ``PrivateGroupSizes``' lower bound ``n_g + Z - c`` clipped to ``[0, n]``.

    For ``n_cap`` at most 128 the size grid keeps every integer, so the grid floor is the
    identity.
    """
    assert n_cap <= 128
    out = {}
    for m in range(n_cap + 1):
        low = -math.inf if m == 0 else m + offset - n_g  # Z >= low
        high = math.inf if m == n_cap else m + offset - n_g + 1  # Z < high
        out[m] = (1.0 if low == -math.inf else discrete_laplace_at_least(low, epsilon)) - (
            0.0 if high == math.inf else discrete_laplace_at_least(high, epsilon)
        )
    return out
