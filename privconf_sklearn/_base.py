"""Logic shared by the conformal classifier and regressor.

Data flow (one way): estimator outputs -> score object -> scores mapped into the public
range [0, 1] -> mechanism -> :class:`~privconf_sklearn.mechanisms.Calibration` -> the
estimator keeps it -> ``predict_set`` asks the score object for the sets at that
threshold. Subclasses supply the score aliases, the target checks and (for regression)
the public score bounds.
"""

from __future__ import annotations

import numbers
import struct
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
from diffprivlib.accountant import BudgetAccountant
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.utils import _safe_indexing, check_random_state, gen_batches, get_tags, indexable
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._validation import check_alpha
from .mechanisms._base import Calibration, QuantileMechanism
from .scores._base import BaseConformityScore

__all__ = ["BasePrivateConformal", "register_card_builder"]

#: Builds ``card_`` from a fitted estimator. The cards layer sits above the estimators
#: and registers it when imported (``import privconf_sklearn`` always does), so that the
#: estimators never import the cards package.
_CARD_BUILDER: Callable[[BasePrivateConformal], Any] | None = None


def register_card_builder(builder: Callable[[BasePrivateConformal], Any]) -> None:
    """Install the function behind :attr:`BasePrivateConformal.card_` (called by ``cards``)."""
    global _CARD_BUILDER
    _CARD_BUILDER = builder


def _estimator_has(attr: str):
    """For ``available_if``: the fitted (or, before fit, the given) estimator has ``attr``."""

    def check(self) -> bool:
        return hasattr(getattr(self, "estimator_", self.estimator), attr)

    return check


class BasePrivateConformal(MetaEstimatorMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared implementation of the private conformal wrappers.

    Parameters are documented on the concrete classes
    (:class:`~privconf_sklearn.PrivateConformalClassifier`,
    :class:`~privconf_sklearn.PrivateConformalRegressor`).
    """

    #: Mapping from the string aliases accepted by ``score`` to score factories.
    _score_aliases: dict[str, Any] = {}

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _encode_targets(self, y, estimator) -> np.ndarray:
        """Validate ``y`` and put it in the form the score expects."""

    def _public_bounds(self, score: BaseConformityScore, scores: np.ndarray):
        """Public range ``(low, high)`` of the scores and a record of how it was set.

        The base class accepts only scores with natural bounds (classification);
        the regressor overrides this with ``score_bounds``.
        """
        if score.natural_bounds is None:
            raise ValueError(
                f"The {type(score).__name__} score is unbounded; this estimator has no "
                "public score bounds to map it into [0, 1]."
            )
        low, high = score.natural_bounds
        outside = (scores < low) | (scores > high)
        if outside.any():
            raise ValueError(
                f"{type(score).__name__} scores must lie in their public range "
                f"[{low}, {high}]; got values {scores[outside][:5].tolist()}."
            )
        return (low, high), scores, {}

    def _broken_privacy_reason(self, bounds_record: dict) -> str | None:
        """Why the privacy guarantee does not hold for this fit, or None."""
        return None

    def _calibration_record(self, calibration: Calibration, bounds_record: dict) -> dict:
        """Entries added to ``calibration_.details`` (default: the bounds record)."""
        return bounds_record

    # ------------------------------------------------------------- validation
    def _resolve_score(self) -> BaseConformityScore:
        score = self.conformity_score
        if isinstance(score, str):
            factory = self._score_aliases.get(score.lower())
            if factory is None:
                raise ValueError(
                    f"conformity_score={score!r} is not a known score; use one of "
                    f"{sorted(self._score_aliases)} or a score instance."
                )
            return factory()
        if isinstance(score, BaseConformityScore):
            return clone(score)
        raise TypeError(
            f"conformity_score must be a string alias {sorted(self._score_aliases)} or a "
            f"BaseConformityScore instance; got {type(score).__name__}."
        )

    def _resolve_mechanism(self) -> QuantileMechanism:
        if not isinstance(self.mechanism, QuantileMechanism):
            raise TypeError(
                "mechanism must be a QuantileMechanism instance such as ExponQ(epsilon=1.0) "
                f"or SplitConformal(); got {self.mechanism!r}."
            )
        return clone(self.mechanism)

    def _resolve_accountant(self) -> BudgetAccountant:
        if self.accountant is not None and not isinstance(self.accountant, BudgetAccountant):
            raise TypeError(
                "accountant must be a diffprivlib BudgetAccountant or None (the default "
                f"accountant); got {type(self.accountant).__name__}."
            )
        return BudgetAccountant.load_default(self.accountant)

    def _check_prefit_estimator(self):
        try:
            check_is_fitted(self.estimator)
        except NotFittedError as exc:
            raise NotFittedError(
                f"prefit=True but {type(self.estimator).__name__} is not fitted: fit it "
                "first, or set prefit=False to fit a clone on part of the data."
            ) from exc
        return self.estimator

    def _split(self, X, y, groups):
        """Split into a training and a calibration part (``prefit=False``)."""
        size = self.calibration_size
        valid = (
            isinstance(size, numbers.Real)
            and not isinstance(size, bool | numbers.Integral)
            and 0.0 < size < 1.0
        ) or (isinstance(size, numbers.Integral) and not isinstance(size, bool) and size >= 1)
        if not valid:
            raise ValueError(
                "calibration_size must be a float in (0, 1) (a fraction) or an int >= 1 "
                f"(a number of rows); got {size!r}."
            )
        n = _num_samples(X)
        rows = np.arange(n)
        train, calibration = train_test_split(
            rows, test_size=size, random_state=check_random_state(self.random_state)
        )

        def pick(a, idx):
            return None if a is None else _safe_indexing(a, idx)

        return (
            (pick(X, train), pick(y, train)),
            (pick(X, calibration), pick(y, calibration), pick(groups, calibration)),
        )

    # ------------------------------------------------------------------- fit
    def fit(self, X, y, groups=None, **fit_params):
        """Fit (unless ``prefit``) and calibrate.

        With ``prefit=True`` the estimator is used as given and this is
        :meth:`fit_calibrate`. With ``prefit=False`` the rows are split: a clone of the
        estimator is fitted on ``1 - calibration_size`` of them and the rest calibrate.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features, passed to the estimator untouched.
        y : array-like of shape (n_samples,)
            Targets.
        groups : array-like of shape (n_samples,), default=None
            Agent id of each row, for federated mechanisms only.
        **fit_params : dict
            Passed to the estimator's ``fit`` when ``prefit=False``.

        Returns
        -------
        self : object
            The calibrated estimator.
        """
        _check_y_given(y)
        if self.prefit:
            if fit_params:
                raise ValueError(
                    f"fit parameters {sorted(fit_params)} were given but prefit=True: the "
                    "estimator is not refitted."
                )
            return self.fit_calibrate(X, y, groups=groups)
        _check_same_length(X, y, groups)
        X, y, groups = indexable(X, y, groups)
        (X_train, y_train), (X_cal, y_cal, groups_cal) = self._split(X, y, groups)
        estimator = clone(self.estimator).fit(X_train, y_train, **fit_params)
        return self._calibrate(estimator, X_cal, y_cal, groups_cal)

    def fit_calibrate(self, X, y, groups=None):
        """Calibrate the already fitted estimator on ``(X, y)``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Calibration features, passed to the estimator untouched.
        y : array-like of shape (n_samples,)
            Calibration targets.
        groups : array-like of shape (n_samples,), default=None
            Agent id of each row, for federated mechanisms only.

        Returns
        -------
        self : object
            The calibrated estimator.
        """
        _check_y_given(y)
        return self._calibrate(self._check_prefit_estimator(), X, y, groups)

    def _calibrate(self, estimator, X, y, groups):
        """Everything after the estimator is fitted. Sets attributes only at the end."""
        alpha = check_alpha(self.alpha)
        score = self._resolve_score()
        mechanism = self._resolve_mechanism()
        accountant = self._resolve_accountant()
        planned = mechanism.privacy_guarantee()
        accountant.check(*planned.accountant_spend())
        score.check_estimator(estimator)

        n = _check_same_length(X, y, groups)
        X, y, groups = indexable(X, y, groups)
        if n == 0:
            raise ValueError("The calibration set is empty: calibration needs at least one row.")
        encoded = self._encode_targets(y, estimator)
        outputs = score.estimator_outputs(estimator, X)
        raw_scores = score.conformity_scores(outputs, encoded, random_state=self.random_state)
        (low, high), clipped_scores, bounds_record = self._public_bounds(score, raw_scores)
        unit_scores = to_unit_range(clipped_scores, low, high)

        calibration = mechanism.calibrate(
            unit_scores, alpha, groups=groups, random_state=self.random_state
        )
        broken = self._broken_privacy_reason(bounds_record)
        if broken is not None:
            calibration = _with_privacy(calibration, calibration.privacy.broken(broken))
        threshold = threshold_in_score_units(calibration, clipped_scores, unit_scores, low, high)
        record = self._calibration_record(calibration, bounds_record)
        if record:
            calibration = replace(calibration, details={**calibration.details, **record})
        epsilon, delta = calibration.privacy.accountant_spend()
        if epsilon > 0 or delta > 0:
            accountant.spend(epsilon, delta)

        self.estimator_ = estimator
        self.score_ = score
        self.mechanism_ = mechanism
        self.calibration_ = calibration
        self.score_bounds_ = (float(low), float(high))
        self.threshold_ = threshold
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(estimator, name):
                setattr(self, name, getattr(estimator, name))
        self._set_extra_fitted_attributes(estimator, bounds_record)
        return self

    def _set_extra_fitted_attributes(self, estimator, bounds_record: dict) -> None:
        """Subclass hook for extra fitted attributes (e.g. ``classes_``)."""

    # --------------------------------------------------------------- predict
    def predict_set(self, X, *, batch_size: int | None = None) -> np.ndarray:
        """Prediction sets at the calibrated threshold.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Test features.
        batch_size : int, default=None
            If given, rows are processed in batches of this size, so that the
            estimator's outputs are never held for more than ``batch_size`` rows at a
            time (the result itself is allocated once).

        Returns
        -------
        ndarray
            See the concrete class.
        """
        check_is_fitted(self, "calibration_")
        if batch_size is None:
            return self._sets_from_outputs(self.score_.estimator_outputs(self.estimator_, X))
        if (
            not isinstance(batch_size, numbers.Integral)
            or isinstance(batch_size, bool)
            or batch_size < 1
        ):
            raise ValueError(f"batch_size must be a positive integer or None; got {batch_size!r}.")
        n = _num_samples(X)
        result = None
        for rows in gen_batches(n, int(batch_size)):
            part = self._sets_from_outputs(
                self.score_.estimator_outputs(self.estimator_, _safe_indexing(X, rows))
            )
            if result is None:
                result = np.empty((n, *part.shape[1:]), dtype=part.dtype)
            result[rows] = part
        if result is None:
            return self._sets_from_outputs(self.score_.estimator_outputs(self.estimator_, X))
        return result

    def _sets_from_outputs(self, outputs: np.ndarray) -> np.ndarray:
        return self.score_.predict_set(outputs, self.threshold_, random_state=self.random_state)

    def predict(self, X):
        """The wrapped estimator's point predictions."""
        check_is_fitted(self, "calibration_")
        return self.estimator_.predict(X)

    @property
    def card_(self):
        """Contract card of this calibration, without a contract (paper 003 Table 1).

        A new :class:`~privconf_sklearn.cards.ContractCard` on each access, with the
        formal layer filled from ``calibration_`` and ``eps_train`` read from a
        diffprivlib model. Keep the object to fill diagnostics
        (``card = est.card_.evaluate(X_test, y_test)``); check a contract with
        ``ContractCard.from_estimator(est, contract, epsilon_train=...)``.
        """
        check_is_fitted(self, "calibration_")
        if _CARD_BUILDER is None:
            raise RuntimeError("privconf_sklearn.cards is not imported; import privconf_sklearn.")
        return _CARD_BUILDER(self)

    # --------------------------------------------------------- scikit-learn
    def __sklearn_clone__(self):
        """Clone parameters, but keep a prefit estimator and the accountant by reference.

        A prefit estimator is frozen (as :class:`sklearn.frozen.FrozenEstimator` does):
        cloning it would drop its fit, so ``GridSearchCV`` over ``alpha`` or
        ``mechanism__epsilon`` could not work. A budget accountant is a shared ledger:
        a copy would record spending nobody reads.
        """
        cloned = super().__sklearn_clone__()
        if self.prefit:
            cloned.estimator = self.estimator
        cloned.accountant = self.accountant
        return cloned

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.categorical = inner.input_tags.categorical
        tags.input_tags.string = inner.input_tags.string
        return tags


def _check_y_given(y) -> None:
    if y is None:
        raise ValueError(
            "This estimator requires y to be passed, but the target y is None: "
            "calibration needs the true labels or targets."
        )


def _check_same_length(X, y, groups=None) -> int:
    n, n_y = _num_samples(X), _num_samples(y)
    if n_y != n:
        raise ValueError(f"X has {n} rows but y has {n_y}: they must match.")
    if groups is not None and _num_samples(groups) != n:
        raise ValueError(
            f"groups has {_num_samples(groups)} entries but X has {n} rows: give one agent "
            "id per row."
        )
    return n


def _with_privacy(calibration: Calibration, privacy) -> Calibration:
    return replace(calibration, privacy=privacy)


_FLOAT64, _INT64 = struct.Struct("<d"), struct.Struct("<q")


def to_unit_range(scores, low: float, high: float):
    """Map scores in the public range ``[low, high]`` to [0, 1]: ``(s - low) / (high - low)``.

    The one expression used for calibration scores and, through
    :func:`threshold_in_score_units`, for the threshold: it is non-decreasing in ``s``
    in floating point (a rounded subtraction, then a rounded division by a positive
    constant), so ``{s : to_unit_range(s) <= t}`` is a half-line.
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
    t = calibration.threshold
    if calibration.privacy.notion == "none":
        covered = unit_scores <= t
        if covered.any():
            candidate = clipped_scores[covered].max()
            if to_unit_range(candidate, low, high) == t:
                return float(candidate)
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
