"""Logic shared by the conformal classifier and regressor.

Data flow (one way): estimator outputs -> score object -> scores mapped into the public
range [0, 1] -> mechanism (one release, or one per Mondrian group) ->
:class:`~privconf_sklearn.mechanisms.Calibration` (or
:class:`~privconf_sklearn.mondrian.MondrianCalibration`) -> the estimator keeps it ->
``predict_set`` asks the score object for the sets at the threshold(s). Subclasses supply
the score aliases, the constraints table, the target checks and (for regression) the
public score bounds.

Privacy accounting: everything a fit will release is planned from parameters alone
(:meth:`BasePrivateConformal._plan`), stated under the user's ``adjacency`` and checked
on the ledger before any data is read; after calibration exactly the recorded guarantee
``calibration_.privacy`` is spent on that ledger, then the fitted attributes are set all
at once.
"""

from __future__ import annotations

import numbers
import struct
import warnings
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.utils import _safe_indexing, gen_batches, get_tags, indexable
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._groups import GroupIndex, check_group_list, group_ids_of_rows
from ._ledger import DetachedLedger, LedgerConstraint, LedgerReference, resolve_ledger, spend
from ._random import check_noise_source, check_random_state
from ._validation import Boolean, Constraint, InstanceOf, Interval, NoneValue, Options
from ._validation import validate_params as _validate_params
from .mechanisms import QuantileMechanism
from .mechanisms._base import Calibration
from .mondrian import (
    MondrianCalibration,
    PrivateGroupSizes,
    UnseenGroupWarning,
    calibrate_groups,
    group_records,
    mondrian_privacy,
    warn_trivial_groups,
)
from .privacy import PrivacyGuarantee
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


class CallableValue(Constraint):
    """A callable (e.g. a Mondrian grouping function)."""

    def accepts_type(self, value) -> bool:
        """Anything callable that is not a string."""
        return callable(value) and not isinstance(value, str)

    def describe(self) -> str:
        """``a callable``."""
        return "a callable X -> group ids"


def common_constraints(score_aliases: dict, mondrian_options: tuple[str, ...]) -> dict:
    """The constraints table shared by the classifier and the regressor."""
    mondrian: list[Constraint] = [NoneValue(), CallableValue()]
    if mondrian_options:
        mondrian.insert(1, Options(*mondrian_options))
    return {
        "mechanism": [InstanceOf(QuantileMechanism, "QuantileMechanism such as ExponQ(epsilon)")],
        "alpha": [Interval("real", 0.0, 1.0, closed="neither")],
        "conformity_score": [
            Options(*score_aliases),
            InstanceOf(BaseConformityScore, "BaseConformityScore instance"),
        ],
        "mondrian": mondrian,
        "group_sizes": [
            NoneValue(),
            Options("public"),
            InstanceOf(PrivateGroupSizes, "PrivateGroupSizes instance"),
        ],
        "adjacency": [Options("replace-one", "add/remove")],
        "prefit": [Boolean()],
        "calibration_size": [
            Interval("real", 0.0, 1.0, closed="neither"),
            Interval("integer", 1, None),
        ],
        "random_state": [
            NoneValue(),
            Interval("integer", 0, None),
            InstanceOf((np.random.RandomState, np.random.Generator), "numpy random generator"),
        ],
        "accountant": [NoneValue(), LedgerConstraint()],
    }


@dataclass(frozen=True)
class _Plan:
    """What a fit will do, fixed from parameters alone before any data is read."""

    params: dict
    score: BaseConformityScore
    mechanism: QuantileMechanism
    ledger: Any
    planned: PrivacyGuarantee
    group_list: tuple | None


class BasePrivateConformal(MetaEstimatorMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared implementation of the private conformal wrappers.

    Parameters are documented on the concrete classes
    (:class:`~privconf_sklearn.PrivateConformalClassifier`,
    :class:`~privconf_sklearn.PrivateConformalRegressor`).
    """

    #: Mapping from the string aliases accepted by ``conformity_score`` to score factories.
    _score_aliases: dict[str, Any] = {}
    #: One constraints table per class, checked by :meth:`_plan`.
    _parameter_constraints: dict[str, list] = {}
    #: Attributes a fit may set; a refit removes the ones it does not set again.
    _fitted_attribute_names: tuple[str, ...] = (
        "estimator_",
        "score_",
        "mechanism_",
        "calibration_",
        "score_bounds_",
        "threshold_",
        "groups_",
        "group_thresholds_",
        "mondrian_",
        "n_features_in_",
        "feature_names_in_",
    )

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _encode_targets(self, y, estimator) -> np.ndarray:
        """Validate ``y`` and put it in the form the score expects."""

    @abstractmethod
    def _check_estimator_kind(self, estimator) -> None:
        """Raise ``TypeError`` if ``estimator`` is of the wrong kind (e.g. a classifier)."""

    def _public_range(self, score: BaseConformityScore, data_range: Callable[[], tuple]):
        """The score range ``(low, high)`` mapped to [0, 1], and whether it is public.

        The base class accepts only scores with natural bounds (classification); the
        regressor overrides this with ``score_bounds``. ``data_range()`` returns the
        calibration scores' ``(min, max)``, for an estimator that takes its range from
        the data (which is not private).
        """
        if score.natural_bounds is None:
            raise ValueError(
                f"The {type(score).__name__} score is unbounded; this estimator has no "
                "public score bounds to map it into [0, 1]."
            )
        low, high = score.natural_bounds
        return low, high, True

    def _clip_to_range(self, score: BaseConformityScore, scores: np.ndarray, low, high):
        """Scores in ``[low, high]`` and the masks of those below and above it (or None).

        Row by row, so that it may run on any block of rows. The base class refuses
        scores outside the natural bounds; the regressor clips them.
        """
        outside = (scores < low) | (scores > high)
        if outside.any():
            raise ValueError(
                f"{type(score).__name__} scores must lie in their public range "
                f"[{low}, {high}]; got values {scores[outside][:5].tolist()}."
            )
        return scores, None, None

    def _range_record(self, low, high, public: bool, below, above, n_samples: int, clipped):
        """The record of how scores were mapped, passed back to the release hooks.

        ``below``, ``above`` and ``clipped`` are what :meth:`_clip_to_range` returned for
        all rows (masks, clipped scores), or the numbers of rows below and above the
        range and the largest clipped score (None for no rows). The record is passed to
        :meth:`_finish_release` and :meth:`_broken_privacy_reason`.
        """
        return None

    def _public_bounds(self, score: BaseConformityScore, scores: np.ndarray):
        """Public range ``(low, high)``, the scores clipped to it, and a record of how."""
        low, high, public = self._public_range(
            score, lambda: (float(scores.min()), float(scores.max()))
        )
        clipped, below, above = self._clip_to_range(score, scores, low, high)
        record = self._range_record(low, high, public, below, above, scores.shape[0], clipped)
        return (low, high), clipped, record

    def _broken_privacy_reason(self, bounds_record) -> str | None:
        """Why the privacy guarantee does not hold for this fit, or None."""
        return None

    def _finish_release(self, calibration: Calibration, bounds_record, rows) -> Calibration:
        """Add estimator-level records to one release (all rows, or one group's rows)."""
        return calibration

    def _warn_about_releases(self, releases: list[Calibration], bounds_record) -> None:
        """Subclass hook: warnings about the final releases (before anything is spent)."""

    def _mondrian_row_groups(self, mondrian, X, encoded, estimator, n_rows: int):
        """Group id of every calibration row and the public group list (or None)."""
        return group_ids_of_rows(mondrian, X, n_rows), None

    def _extra_fitted_attributes(self, estimator, calibration) -> dict:
        """Subclass hook: further fitted attributes (e.g. ``classes_``)."""
        return {}

    # ------------------------------------------------------------- validation
    def _validated(self, *names: str) -> dict:
        """Some parameters checked against the constraints table (see :meth:`_plan`)."""
        return _validate_params(self, {name: self._parameter_constraints[name] for name in names})

    def _resolve_score(self) -> BaseConformityScore:
        """A fresh score object from ``conformity_score`` (validated)."""
        score = self._validated("conformity_score")["conformity_score"]
        return self._score_aliases[score]() if isinstance(score, str) else clone(score)

    def _resolve_mechanism(self) -> QuantileMechanism:
        """A copy of ``mechanism`` (validated as a QuantileMechanism)."""
        return clone(self._validated("mechanism")["mechanism"])

    def _check_mondrian(self, params: dict, mechanism: QuantileMechanism) -> tuple | None:
        """Consistency of ``mondrian``, ``group_sizes`` and the mechanism (no data read).

        Returns the declared public group list (private sizes with a callable), or None.
        """
        mondrian, sizes = params["mondrian"], params["group_sizes"]
        name = type(self).__name__
        if mondrian is None:
            if sizes is not None:
                raise ValueError(
                    f"{name}: group_sizes={sizes!r} is only used with mondrian; set mondrian "
                    "or leave group_sizes=None."
                )
            return None
        if sizes is None:
            raise ValueError(
                f"{name}: mondrian={mondrian!r} needs group_sizes: 'public' (each group's "
                "calibration size is disclosed, as the total calibration size is) or "
                "PrivateGroupSizes(epsilon=...) (sizes released with their own budget). "
                "See the user guide, Mondrian calibration."
            )
        if mechanism.requires_groups:
            raise ValueError(
                f"{name}: mondrian needs a central mechanism (ExponQ, PCOQS, DPAPS, "
                f"SplitConformal); {type(mechanism).__name__} is federated."
            )
        if not isinstance(sizes, PrivateGroupSizes):
            return None
        declared = sizes.get_params()["group_ids"]
        sizes.privacy_guarantee()  # validates epsilon and beta
        if isinstance(mondrian, str):
            if declared is not None:
                raise ValueError(
                    f"{name}: with mondrian='class' the groups are the classifier's classes_; "
                    "PrivateGroupSizes(group_ids=...) must be None."
                )
            return None
        if declared is None:
            raise ValueError(
                f"{name}: PrivateGroupSizes with a mondrian callable needs the public list "
                "of group ids it can return, PrivateGroupSizes(epsilon, group_ids=[...]): "
                "the groups present in the calibration data would otherwise be disclosed."
            )
        return check_group_list(declared, name="PrivateGroupSizes.group_ids")

    def _plan(self) -> _Plan:
        """Validate every parameter and check the budget: all before any data is read."""
        params = _validate_params(self, self._parameter_constraints)
        self._check_estimator_kind(self.estimator)
        score = self._resolve_score()
        mechanism = self._resolve_mechanism()
        guarantee = mechanism.privacy_guarantee()  # validates the mechanism's parameters
        group_list = self._check_mondrian(params, mechanism)
        if params["mondrian"] is None:
            planned = guarantee.under(params["adjacency"])
        else:
            planned = mondrian_privacy(mechanism, params["group_sizes"], params["adjacency"])
        ledger = resolve_ledger(self.accountant)
        ledger.check(*planned.accountant_spend())
        return _Plan(params, score, mechanism, ledger, planned, group_list)

    def _check_prefit_estimator(self):
        try:
            check_is_fitted(self.estimator)
        except NotFittedError as exc:
            raise NotFittedError(
                f"prefit=True but {type(self.estimator).__name__} is not fitted: fit it "
                "first, or set prefit=False to fit a clone on part of the data."
            ) from exc
        return self.estimator

    def _split(self, X, y, groups, size):
        """Split into a training and a calibration part (``prefit=False``)."""
        n = _num_samples(X)
        if isinstance(size, numbers.Integral) and size >= n:
            raise ValueError(
                f"calibration_size={size} rows leaves no training rows out of {n}; use a "
                "smaller number or a fraction."
            )
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
        Parameters, the mechanism and the privacy budget are checked before any data is
        read (before the model is fitted, too).

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Features, passed to the estimator untouched.
        y : array-like of shape (n_samples,)
            Targets.
        groups : array-like of shape (n_samples,), default=None
            Agent id of each row, for federated mechanisms only (Mondrian groups come
            from ``mondrian``).
        **fit_params : dict
            Passed to the estimator's ``fit`` when ``prefit=False``.

        Returns
        -------
        self : object
            The calibrated estimator.
        """
        plan = self._plan()
        _check_y_given(y)
        if plan.params["prefit"]:
            if fit_params:
                raise ValueError(
                    f"fit parameters {sorted(fit_params)} were given but prefit=True: the "
                    "estimator is not refitted."
                )
            return self._calibrate(plan, self._check_prefit_estimator(), X, y, groups)
        _check_same_length(X, y, groups)
        X, y, groups = indexable(X, y, groups)
        (X_train, y_train), (X_cal, y_cal, groups_cal) = self._split(
            X, y, groups, plan.params["calibration_size"]
        )
        estimator = clone(self.estimator).fit(X_train, y_train, **fit_params)
        return self._calibrate(plan, estimator, X_cal, y_cal, groups_cal)

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
        plan = self._plan()
        _check_y_given(y)
        return self._calibrate(plan, self._check_prefit_estimator(), X, y, groups)

    def _calibrate(self, plan: _Plan, estimator, X, y, groups):
        """Everything after the estimator is fitted. Sets attributes only at the end."""
        params, score, mechanism = plan.params, plan.score, plan.mechanism
        alpha, adjacency = params["alpha"], params["adjacency"]
        mondrian = params["mondrian"]
        score.check_estimator(estimator)
        n = _check_same_length(X, y, groups)
        X, y, groups = indexable(X, y, groups)
        if n == 0:
            raise ValueError("The calibration set is empty: calibration needs at least one row.")
        if mondrian is not None and groups is not None:
            raise ValueError(
                "groups (agent ids) is for federated mechanisms; Mondrian groups come from "
                "the mondrian parameter."
            )
        encoded = self._encode_targets(y, estimator)
        if mondrian is not None:
            row_groups, group_list = self._mondrian_row_groups(mondrian, X, encoded, estimator, n)
            group_list = group_list or plan.group_list
        outputs = score.estimator_outputs(estimator, X)
        raw_scores = score.conformity_scores(outputs, encoded, random_state=self.random_state)
        (low, high), clipped_scores, bounds_record = self._public_bounds(score, raw_scores)
        unit_scores = to_unit_range(clipped_scores, low, high)
        if mondrian is None:
            calibration = mechanism.calibrate(
                unit_scores, alpha, groups=groups, random_state=self.random_state
            )
            return self._complete_release(
                plan,
                estimator,
                calibration,
                (low, high),
                bounds_record,
                lambda t: largest_covered_score(clipped_scores, unit_scores, t),
            )
        broken = self._broken_privacy_reason(bounds_record)
        fitted: dict[str, Any] = {}
        if group_list is None:
            index = GroupIndex.from_rows(row_groups)
        else:
            index = GroupIndex(group_list)
        codes = index.codes(row_groups)
        if (codes < 0).any():
            unknown = list(dict.fromkeys(row_groups[codes < 0].tolist()))
            raise ValueError(
                f"mondrian(X) returned group ids not in PrivateGroupSizes.group_ids: "
                f"{unknown[:10]}; declare every group the callable can return."
            )
        sizes = params["group_sizes"]
        releases, details, owner = calibrate_groups(
            mechanism,
            unit_scores,
            codes,
            index.group_ids,
            alpha,
            group_sizes=sizes,
            noise=check_noise_source(self.random_state),
        )
        final = [self._finish_release(r.calibration, bounds_record, r.rows) for r in releases]
        records, bound_details = group_records(
            final,
            index.group_ids,
            group_sizes=sizes,
            mechanism=mechanism,
            alpha=alpha,
            n_samples=n,
        )
        warn_trivial_groups(records, stacklevel=3)
        private_sizes = isinstance(sizes, PrivateGroupSizes)
        n_read = len(final) if private_sizes else sum(c.privacy.epsilon != 0 for c in final)
        privacy = mondrian_privacy(
            mechanism, sizes, adjacency, n_groups_read=n_read, n_groups=len(final)
        )
        grouped = MondrianCalibration(
            mechanism=type(mechanism).__name__,
            alpha=alpha,
            n_samples=n,
            group_sizes="private" if private_sizes else "public",
            groups=records,
            privacy=privacy if broken is None else privacy.broken(broken),
            details={**details, **bound_details},
            owner_diagnostics=owner,
        )
        fitted["groups_"] = _object_array(index.group_ids)
        fitted["group_thresholds_"] = np.array(
            [
                threshold_in_score_units(c, clipped_scores[r.rows], unit_scores[r.rows], low, high)
                for c, r in zip(final, releases, strict=True)
            ]
        )
        fitted["mondrian_"] = mondrian

        return self._set_fitted(plan, estimator, grouped, final, (low, high), bounds_record, fitted)

    def _complete_release(
        self,
        plan: _Plan,
        estimator,
        calibration: Calibration,
        bounds: tuple,
        bounds_record,
        largest_covered: Callable[[float], float | None],
    ) -> BasePrivateConformal:
        """Everything after the mechanism's release (without Mondrian groups).

        Shared by :meth:`fit_calibrate` and :func:`privconf_sklearn.dask.fit_calibrate`:
        the estimator-level records, the privacy guarantee under ``adjacency`` (broken
        if the score range came from the data), the threshold in score units
        (``largest_covered(t)``: the largest clipped calibration score whose image is at
        most ``t``, or None; see :func:`threshold_in_score_units`), the warnings, the
        spending on the ledger and the fitted attributes.
        """
        low, high = bounds
        broken = self._broken_privacy_reason(bounds_record)
        calibration = self._finish_release(calibration, bounds_record, slice(None))
        privacy = calibration.privacy.under(plan.params["adjacency"])
        calibration = replace(
            calibration, privacy=privacy if broken is None else privacy.broken(broken)
        )
        fitted: dict[str, Any] = {
            "threshold_": score_threshold(calibration, largest_covered, low, high)
        }
        return self._set_fitted(
            plan, estimator, calibration, [calibration], bounds, bounds_record, fitted
        )

    def _set_fitted(
        self,
        plan: _Plan,
        estimator,
        calibration: Calibration | MondrianCalibration,
        final: list[Calibration],
        bounds: tuple,
        bounds_record,
        fitted: dict[str, Any],
    ) -> BasePrivateConformal:
        """Warn, spend ``calibration.privacy`` on the ledger, then set every attribute."""
        low, high = bounds
        self._warn_about_releases(final, bounds_record)
        epsilon, delta = calibration.privacy.accountant_spend()
        if epsilon > 0 or delta > 0:
            spend(plan.ledger, epsilon, delta)

        fitted.update(
            estimator_=estimator,
            score_=plan.score,
            mechanism_=plan.mechanism,
            calibration_=calibration,
            score_bounds_=(float(low), float(high)),
        )
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(estimator, name):
                fitted[name] = getattr(estimator, name)
        fitted.update(self._extra_fitted_attributes(estimator, calibration))
        for name in self._fitted_attribute_names:
            if name not in fitted and name in vars(self):
                delattr(self, name)
        for name, value in fitted.items():
            setattr(self, name, value)
        return self

    # --------------------------------------------------------------- predict
    def predict_set(self, X, *, batch_size: int | None = None) -> np.ndarray:
        """Prediction sets at the calibrated threshold(s).

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
        if batch_size is not None and (
            not isinstance(batch_size, numbers.Integral)
            or isinstance(batch_size, bool)
            or batch_size < 1
        ):
            raise ValueError(f"batch_size must be a positive integer or None; got {batch_size!r}.")
        n = _num_samples(X)
        unseen: dict = {}
        if batch_size is None or n == 0:
            result = self._sets(X, unseen)
        else:
            result = None
            for rows in gen_batches(n, int(batch_size)):
                part = self._sets(_safe_indexing(X, rows), unseen)
                if result is None:
                    result = np.empty((n, *part.shape[1:]), dtype=part.dtype)
                result[rows] = part
        if unseen:
            shown = list(unseen)[:10]
            warnings.warn(
                f"{sum(unseen.values())} test rows fall in groups without a calibrated "
                f"threshold ({shown}{' ...' if len(unseen) > 10 else ''}): they get the "
                "trivial set (every label / the widest interval).",
                UnseenGroupWarning,
                stacklevel=2,
            )
        return result

    def _sets(self, X, unseen: dict) -> np.ndarray:
        """Sets for the rows of ``X``; counts test rows of unseen groups into ``unseen``."""
        outputs = self.score_.estimator_outputs(self.estimator_, X)
        if "group_thresholds_" not in vars(self):  # one threshold, not one per group
            return self.score_.predict_set(outputs, self.threshold_, random_state=self.random_state)
        ids = group_ids_of_rows(self.mondrian_, X, outputs.shape[0])
        codes = GroupIndex(self.groups_.tolist()).codes(ids)
        for group in ids[codes < 0].tolist():
            unseen[group] = unseen.get(group, 0) + 1
        return self._sets_by_row_group(outputs, codes)

    def _sets_by_row_group(self, outputs: np.ndarray, codes: np.ndarray) -> np.ndarray:
        """Rows of group ``g`` use ``group_thresholds_[g]``; code -1 the trivial set."""
        top = self._full_set_threshold()
        result = None
        for code in np.unique(codes).tolist():
            rows = np.flatnonzero(codes == code)
            threshold = top if code < 0 else float(self.group_thresholds_[code])
            part = self.score_.predict_set(outputs[rows], threshold, random_state=self.random_state)
            if result is None:
                result = np.empty((outputs.shape[0], *part.shape[1:]), dtype=part.dtype)
            result[rows] = part
        if result is None:  # no rows
            return self.score_.predict_set(outputs, top, random_state=self.random_state)
        return result

    def _full_set_threshold(self) -> float:
        """The threshold of the trivial set (every label, the widest interval)."""
        return self.score_bounds_[1]

    def predict(self, X):
        """The wrapped estimator's point predictions."""
        check_is_fitted(self, "calibration_")
        return self.estimator_.predict(X)

    @property
    def card_(self):
        """Contract card of this calibration, without a contract.

        The card of Table 1 of "Contract Cards for Auditable Private Conformal
        Prediction" (2026).

        A new :class:`~privconf_sklearn.cards.ContractCard` on each access, with the
        formal layer filled from ``calibration_`` (a Mondrian calibration: every
        group's certificate and release, and the composed guarantee) and ``eps_train``
        read from a diffprivlib model. Keep the object to fill diagnostics
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
        if self.prefit is True:
            cloned.estimator = self.estimator
        cloned.accountant = self.accountant
        return cloned

    def __getstate__(self):
        """Pickle with a reference to the ledger instead of a copy of it.

        Unpickled in this process, the estimator gets its very ledger back; in another
        process a :class:`~privconf_sklearn._ledger.DetachedLedger` that refuses to
        spend (see :mod:`privconf_sklearn._ledger`).
        """
        state = dict(super().__getstate__())  # a copy: object.__getstate__ is __dict__ itself
        state["accountant"] = LedgerReference.to(state.get("accountant"))
        return state

    def __setstate__(self, state):
        """Restore, resolving the ledger reference (see :meth:`__getstate__`)."""
        state = dict(state)
        reference = state.get("accountant")
        if isinstance(reference, LedgerReference):
            state["accountant"] = reference.resolve()
        elif reference is not None:  # pickled by a version that copied the ledger
            state["accountant"] = DetachedLedger(f"a copy of {type(reference).__name__}")
        super().__setstate__(state)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.categorical = inner.input_tags.categorical
        tags.input_tags.string = inner.input_tags.string
        return tags


def _object_array(values) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


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
    return score_threshold(
        calibration,
        lambda t: largest_covered_score(clipped_scores, unit_scores, t),
        low,
        high,
    )


def largest_covered_score(clipped_scores: np.ndarray, unit_scores: np.ndarray, t: float):
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

    ``largest_covered(t)`` is the largest clipped calibration score whose image is at
    most ``t`` (None if there is none); it is asked only for a non-private release, and
    not for the identity map ``low = 0``, ``high = 1``, where ``T = t`` (each score is
    its own image, so both bullets of :func:`threshold_in_score_units` give ``t``).
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
