"""The exponential mechanism over a finite range of candidates, sampled exactly."""

from __future__ import annotations

from fractions import Fraction
from numbers import Real

import numpy as np

from .._param_validation import Interval, StrOptions, validate_params
from .._random import check_noise_source
from ._guarantee import ADJACENCY_STATEMENTS, PrivacyGuarantee

__all__ = ["EXPONENTIAL_ANALYSES", "ExponentialMechanism", "exact_penalties"]

#: The privacy analyses :class:`ExponentialMechanism` offers (see its docstring).
EXPONENTIAL_ANALYSES = ("standard", "monotone", "range-bounded")

#: Width of the interval that contains every utility change, per unit of ``sensitivity``.
_RANGE_PER_SENSITIVITY = {"standard": 2.0, "monotone": 1.0, "range-bounded": 1.0}


def _checked_utilities(utilities) -> np.ndarray:
    utilities = np.asarray(utilities, dtype=np.float64)
    if utilities.ndim != 1 or utilities.size == 0 or not np.isfinite(utilities).all():
        raise ValueError("utilities must be a non-empty one-dimensional array of finite values.")
    return utilities


def exact_penalties(utilities: np.ndarray) -> tuple[np.ndarray, int]:
    """Integers ``a_j`` and ``D = 2^k`` with ``a_j / D = max(u) - u_j`` exactly.

    Every finite float is ``M 2^e`` with an integer ``|M| < 2^53`` (:func:`numpy.frexp`);
    with ``e_min`` the smallest exponent of a nonzero utility, ``u_j 2^{-e_min}`` is an
    integer, and so is the difference from the maximum. int64 when the exponents span
    at most 9 binary orders (no overflow), Python ints beyond.

    Parameters
    ----------
    utilities : ndarray of shape (m,)
        Finite float64 utilities.

    Returns
    -------
    penalties : ndarray of shape (m,)
        Non-negative integers (int64, or an object array of Python ints).
    denominator : int
        A power of two.
    """
    fractions, exponents = np.frexp(utilities)
    mantissas = np.ldexp(fractions, 53).astype(np.int64)  # exact: |u| = |M| 2^(e - 53)
    exponents = exponents.astype(np.int64) - 53
    nonzero = mantissas != 0
    lowest = int(exponents[nonzero].min()) if nonzero.any() else 0
    spread = np.where(nonzero, exponents - lowest, 0)
    if spread.max() <= 9:  # |M| 2^spread < 2^62
        scaled = mantissas << spread
    else:
        scaled = mantissas.astype(object) * (2 ** spread.astype(object))
    penalties = scaled.max() - scaled
    if lowest > 0:
        return penalties.astype(object) * 2**lowest, 1
    return penalties, 2**-lowest


class ExponentialMechanism:
    """Select one of finitely many candidates, favouring high utility.

    Candidate ``j`` with utility ``u_j`` (a function of the data set) is released with
    probability proportional to ``exp(epsilon * u_j / R)`` (McSherry and Talwar 2007),
    where ``R`` is the width of an interval that, for every pair of neighbouring data
    sets ``D, D'``, contains all the changes ``u_j(D') - u_j(D)``:

    - ``analysis="standard"``: ``|u_j(D') - u_j(D)| <= sensitivity`` for every ``j``,
      so the changes lie in ``[-sensitivity, sensitivity]`` and ``R = 2 sensitivity``
      (the usual ``exp(epsilon u / (2 Delta))``);
    - ``analysis="monotone"``: in addition, for each pair all utilities move in the
      same direction, so the changes lie in ``[0, sensitivity]`` or in
      ``[-sensitivity, 0]`` and ``R = sensitivity`` (McSherry and Talwar 2007,
      Sec. 2.2);
    - ``analysis="range-bounded"``: ``sensitivity`` is itself the width ``R`` of an
      interval ``[c, c + R]`` (``c`` may depend on the pair) that holds every change
      (Durfee and Rogers 2019, "Practical differentially private top-k selection with
      pay-what-you-get composition", Definition 3.3).

    **Privacy (one proof for all three).** If every ``u_j(D') - u_j(D)`` lies in
    ``[c, c + R]``, then ``exp(epsilon u_j(D') / R) / exp(epsilon u_j(D) / R)`` lies in
    ``[e^{epsilon c / R}, e^{epsilon c / R + epsilon}]`` for every ``j``, so the
    normalising sums satisfy ``Z(D') / Z(D)`` in the same interval, and
    ``P_{D'}(j) / P_D(j)`` (the ratio for ``j`` divided by ``Z(D') / Z(D)``) lies in
    ``[e^{-epsilon}, e^{epsilon}]``. The mechanism is therefore epsilon-DP under every
    neighbouring relation for which the caller's statement about the utility changes
    holds; ``adjacency`` records that relation.

    **Accuracy.** The released candidate has utility below ``max_k u_k - R t / epsilon``
    with probability at most ``m e^{-t}`` (``m`` candidates): each such candidate has
    probability at most ``e^{-t}`` times that of the best one.

    **Exact sampling.** :meth:`select` and :meth:`select_penalties` draw ``j`` with
    probability *exactly* proportional to ``exp(epsilon u_j / R)``, for the utilities as
    given (float utilities are exact dyadic rationals; penalties are integers over a
    common denominator), with the exact ratio ``epsilon / R``: an inverse-CDF draw whose
    uniform is read bit by bit and compared with the cumulative weights through rigorous
    error bounds, refined with exact integer arithmetic in the rare case the two are
    too close (:meth:`NoiseSource.exponential_mechanism
    <privconf_sklearn._random.NoiseSource.exponential_mechanism>`). The proof above
    therefore holds for the released index itself, with no floating-point caveat.

    **Numerics of** :meth:`log_probabilities` (float64, for audits and plots): utilities
    are shifted by their maximum before being multiplied by epsilon, so the log-weights
    are ``epsilon ((u_j - max u) / R) <= 0``: finite or ``-inf``, never NaN, for any
    finite epsilon (``1e308`` included); the best candidates keep log-weight 0.

    Parameters
    ----------
    epsilon : float
        Privacy parameter, > 0 and finite.
    sensitivity : float
        ``Delta`` (standard, monotone) or the range ``R`` (range-bounded), > 0 and
        finite, as described above.
    analysis : {"standard", "monotone", "range-bounded"}, default="standard"
        Which statement about the utility changes ``sensitivity`` is.
    adjacency : {"replace-one", "add/remove", "replace-one and add/remove"}, \
            default="replace-one and add/remove"
        Neighbouring relation(s) under which that statement holds.

    Examples
    --------
    >>> import numpy as np
    >>> from privconf_sklearn.privacy import ExponentialMechanism
    >>> mechanism = ExponentialMechanism(1.0, 1.0, analysis="range-bounded")
    >>> np.exp(mechanism.log_probabilities([0.0, 0.0, -np.log(2.0)])).round(2)
    array([0.4, 0.4, 0.2])
    >>> mechanism.select([0.0, 0.0, -np.log(2.0)], random_state=0) in (0, 1, 2)
    True
    >>> mechanism.select_penalties([0, 3, 1], 2, random_state=0) in (0, 1, 2)
    True
    >>> mechanism.privacy_guarantee().epsilon
    1.0
    """

    _parameter_constraints = {
        "epsilon": [Interval(Real, 0, None, closed="neither")],
        "sensitivity": [Interval(Real, 0, None, closed="neither")],
        "analysis": [StrOptions(set(EXPONENTIAL_ANALYSES))],
        "adjacency": [StrOptions(set(ADJACENCY_STATEMENTS))],
    }

    def __init__(
        self,
        epsilon: float,
        sensitivity: float,
        *,
        analysis: str = "standard",
        adjacency: str = "replace-one and add/remove",
    ):
        checked = validate_params(
            self._parameter_constraints,
            {
                "epsilon": epsilon,
                "sensitivity": sensitivity,
                "analysis": analysis,
                "adjacency": adjacency,
            },
            type(self).__name__,
        )
        self.epsilon: float = checked["epsilon"]
        self.sensitivity: float = checked["sensitivity"]
        self.analysis: str = checked["analysis"]
        self.adjacency: str = checked["adjacency"]

    def __repr__(self) -> str:
        return (
            f"ExponentialMechanism(epsilon={self.epsilon!r}, sensitivity="
            f"{self.sensitivity!r}, analysis={self.analysis!r}, adjacency={self.adjacency!r})"
        )

    @property
    def utility_range(self) -> float:
        """``R``: the width of the interval holding every utility change of a pair."""
        return _RANGE_PER_SENSITIVITY[self.analysis] * self.sensitivity

    def log_probabilities(self, utilities) -> np.ndarray:
        """Normalised ``log P(output = j)`` for the given utilities.

        Parameters
        ----------
        utilities : array-like of shape (m,)
            Finite utility of each candidate (higher is more likely).

        Returns
        -------
        ndarray of shape (m,)
            ``epsilon (u_j - max u) / R`` minus its log-sum-exp; ``-inf`` for candidates
            whose probability underflows.
        """
        utilities = _checked_utilities(utilities)
        with np.errstate(over="ignore"):  # -inf is the intended limit of a huge epsilon
            log_weights = self.epsilon * ((utilities - utilities.max()) / self.utility_range)
        return log_weights - np.log(np.exp(log_weights).sum())

    @property
    def exact_rate(self) -> Fraction:
        """``epsilon / R`` as an exact rational (floats are dyadic rationals)."""
        factor = _RANGE_PER_SENSITIVITY[self.analysis]
        return Fraction(self.epsilon) / (Fraction(self.sensitivity) * Fraction(factor))

    def select(self, utilities, random_state=None) -> int:
        """Draw the index of one candidate, with probability exactly ``P(output = j)``.

        The float utilities are converted exactly to integer penalties
        ``(max u - u_j) 2^k`` over the denominator ``2^k`` (:func:`exact_penalties`)
        and drawn by :meth:`select_penalties`.

        Parameters
        ----------
        utilities : array-like of shape (m,)
            Finite utility of each candidate.
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy randomness: ``None`` (production) reads the operating
            system's cryptographic generator; anything else is reproducible, for tests.

        Returns
        -------
        int
            The released index ``j`` (0-based).
        """
        utilities = _checked_utilities(utilities)
        penalties, denominator = exact_penalties(utilities)
        return self.select_penalties(penalties, denominator, random_state)

    def select_penalties(self, penalties, denominator: int, random_state=None) -> int:
        """Draw exactly for the utilities ``u_j = -penalties[j] / denominator``.

        Candidate ``j`` is released with probability exactly proportional to
        ``exp(-epsilon penalties[j] / (denominator R))``: the mechanism for utilities
        that are exact rationals (for example counts weighted by a rational level).

        Parameters
        ----------
        penalties : array-like of shape (m,)
            Non-negative integers (int64, or Python ints of any size).
        denominator : int
            Positive integer common to all utilities.
        random_state : None, int, RandomState or Generator, default=None
            Source of the privacy randomness (see :meth:`select`).

        Returns
        -------
        int
            The released index ``j`` (0-based).
        """
        noise = check_noise_source(random_state)
        return noise.exponential_mechanism(penalties, denominator, self.exact_rate)

    def privacy_guarantee(self, description: str = "") -> PrivacyGuarantee:
        """Pure epsilon-DP under :attr:`adjacency`."""
        return PrivacyGuarantee.pure(
            self.epsilon,
            adjacency=self.adjacency,
            description=description
            or f"Exponential mechanism ({self.analysis} analysis, utility range "
            f"{self.utility_range:g}).",
        )
