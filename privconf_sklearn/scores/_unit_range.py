"""Scores in a public range ``[low, high]`` and their images in [0, 1].

Mechanisms see calibration scores in the public range [0, 1] only: an estimator maps
each score ``s`` of its public range ``[low, high]`` (natural bounds, or the regressor's
``score_bounds``) to ``(s - low) / (high - low)`` (:func:`to_unit_range`), and maps the
released threshold ``t`` back to the score threshold ``T`` that covers exactly the
scores whose image is at most ``t`` (:func:`threshold_in_score_units`). The card
verifier recomputes ``T`` of a private release from ``t`` and the public bounds alone
(:func:`public_score_threshold`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from ..mechanisms import Calibration

__all__ = [
    "public_score_threshold",
    "score_threshold",
    "threshold_in_score_units",
    "to_unit_range",
]

_FLOAT64, _INT64 = struct.Struct("<d"), struct.Struct("<q")


def to_unit_range(scores, low: float, high: float):
    """Map scores in the public range ``[low, high]`` to [0, 1]: ``(s - low) / (high - low)``.

    The one expression used for calibration scores and, through
    :func:`threshold_in_score_units`, for the threshold: it is non-decreasing in ``s``
    in floating point (a rounded subtraction, then a rounded division by a positive
    constant), so ``{s : to_unit_range(s) <= t}`` is a half-line.

    Parameters
    ----------
    scores : float or ndarray
        Scores in ``[low, high]``.
    low, high : float
        The public range, ``low < high``.

    Returns
    -------
    float or ndarray
        The images in [0, 1].
    """
    return (scores - low) / (high - low)


def _ordered_key(value: float) -> int:
    """Integer key ordered like the float64 values (``-0.0`` and ``0.0`` share key 0)."""
    bits = _INT64.unpack(_FLOAT64.pack(value))[0]
    return bits if bits >= 0 else -(bits & 0x7FFF_FFFF_FFFF_FFFF)


def _from_ordered_key(key: int) -> float:
    magnitude = _FLOAT64.unpack(_INT64.pack(abs(key)))[0]
    return magnitude if key >= 0 else -magnitude


def threshold_in_score_units(
    calibration: Calibration,
    clipped_scores: np.ndarray,
    unit_scores: np.ndarray,
    low: float,
    high: float,
) -> float:
    """The score threshold ``T`` that covers exactly what the unit threshold covers.

    A score ``s`` is covered iff ``to_unit_range(s) <= t`` for the mechanism's threshold
    ``t``. Mapping ``t`` back by ``low + t (high - low)`` can move it by an ulp either
    way, and the map is not one-to-one (several scores round to the same unit value),
    so instead:

    - ``T`` is the largest float64 ``s`` in ``[low, high]`` with
      ``to_unit_range(s) <= t``, found by bisection on the ordered float64 bit
      patterns (at most 64 steps). Then ``s <= T`` iff ``to_unit_range(s) <= t`` for
      every ``s`` in ``[low, high]``: prediction and calibration compare the same
      floats. ``T`` depends on ``t`` and the public bounds only, so it costs no privacy.
      ``t = 1`` gives ``T = high``.
    - For a non-private release (``privacy.notion == "none"``) whose ``t`` is the image
      of a calibration score, ``T`` is the largest calibration score with that image:
      the order statistic the mechanism picked, in score units, exactly (so split
      conformal intervals equal MAPIE's bit for bit). It covers every calibration
      score the mechanism counted as covered and no other, and lies below the first
      bullet's ``T`` only by an interval of scores that all map to ``t`` and hold no
      calibration score.

    For the identity map (``low = 0``, ``high = 1``, classification) ``T = t``.

    Parameters
    ----------
    calibration : Calibration
        The mechanism's release.
    clipped_scores, unit_scores : ndarray of shape (n_samples,)
        Calibration scores in ``[low, high]`` and their images in [0, 1].
    low, high : float
        Public score range.

    Returns
    -------
    float
    """
    return score_threshold(
        calibration,
        lambda t: _largest_covered_score(clipped_scores, unit_scores, t),
        low,
        high,
    )


def _largest_covered_score(clipped_scores: np.ndarray, unit_scores: np.ndarray, t: float):
    """The largest clipped score whose image is at most ``t``, or None if there is none."""
    covered = unit_scores <= t
    return clipped_scores[covered].max() if covered.any() else None


def score_threshold(
    calibration: Calibration,
    largest_covered: Callable[[float], float | None],
    low: float,
    high: float,
) -> float:
    """:func:`threshold_in_score_units`, reading the scores only through ``largest_covered``.

    For scores that are not in one place (computed block by block): ``T`` needs at most
    one question about them.

    Parameters
    ----------
    calibration : Calibration
        The mechanism's release.
    largest_covered : callable
        ``largest_covered(t)``: the largest clipped calibration score whose image is at
        most ``t`` (None if there is none). Asked only for a non-private release, and
        not for the identity map ``low = 0``, ``high = 1``, where ``T = t`` (each score
        is its own image, so both bullets of :func:`threshold_in_score_units` give
        ``t``).
    low, high : float
        Public score range.

    Returns
    -------
    float
    """
    t = calibration.threshold
    if calibration.privacy.notion == "none" and not (low == 0.0 and high == 1.0):
        candidate = largest_covered(t)
        if candidate is not None and to_unit_range(candidate, low, high) == t:
            return float(candidate)
    return public_score_threshold(t, low, high)


def public_score_threshold(t: float, low: float, high: float) -> float:
    """The largest float64 ``s`` in ``[low, high]`` with ``to_unit_range(s) <= t``.

    The threshold in score units of a private release: a function of ``t`` and the
    public bounds only (first bullet of :func:`threshold_in_score_units`), which the
    card verifier recomputes.

    Parameters
    ----------
    t : float
        Released threshold in [0, 1].
    low, high : float
        Public score range.

    Returns
    -------
    float
    """
    if low == 0.0 and high == 1.0:
        return float(t)
    if to_unit_range(high, low, high) <= t:
        return float(high)
    below, above = _ordered_key(low), _ordered_key(high)  # image(low) = 0 <= t < image(high)
    while above - below > 1:
        middle = (below + above) // 2
        if to_unit_range(_from_ordered_key(middle), low, high) <= t:
            below = middle
        else:
            above = middle
    return _from_ordered_key(below)
