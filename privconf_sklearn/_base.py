"""Logic shared by the conformal classifier and regressor.

Data flow (one way): estimator outputs -> score object -> scores mapped into the public
range [0, 1] -> mechanism (one release, or one per Mondrian group) ->
:class:`~privconf_sklearn.mechanisms.Calibration` (or
:class:`~privconf_sklearn.mondrian.MondrianCalibration`) -> the estimator keeps it ->
``predict_set`` asks the score object for the sets at the threshold(s). Subclasses supply
the score aliases, the constraints table, the target checks and (for regression) the
public score bounds, as the private hooks below.

Privacy accounting: a calibration runs the public steps of a
:class:`~privconf_sklearn.base.CalibrationRun` (``privconf_sklearn._calibration_run``),
in memory (:meth:`BasePrivateConformal._calibrate`) as on dask. The most it can release
is planned from parameters alone (:meth:`BasePrivateConformal.start_calibration`),
stated under the user's ``adjacency`` and checked on the ledger before anything is read
or fitted. Once the inputs are checked, the exact guarantee the release will record is
computed from public quantities (parameters, the number of calibration rows, the agent
or public group sizes) and reserved, that is checked and spent in one step under the
ledger's lock (``CalibrationRun.reserve``), before the model sees a calibration row.
After the release, its recorded guarantee ``calibration_.privacy`` must spend exactly
what was reserved, then the fitted attributes are set all at once.
"""

from __future__ import annotations

import sys
import weakref
from abc import ABCMeta, abstractmethod
from collections.abc import Callable
from dataclasses import replace
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import train_test_split
from sklearn.utils import _safe_indexing, gen_batches, get_tags, indexable
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._calibration_run import CalibrationRun, CalibrationScorer, MappedScores
from ._groups import GroupIndex, check_group_list, group_ids_of_rows, index_rows
from ._ledger import LEDGER, DetachedLedger, LedgerReference, resolve_ledger
from ._param_validation import (
    Interval,
    InvalidParameterError,
    RealNotInt,
    StrOptions,
    validate_params,
)
from ._random import check_noise_source, check_random_state
from ._warnings import warn_at_caller
from .mechanisms import Calibration, QuantileMechanism, ScoreArray, agent_labels
from .metrics import DefaultScoreWarning
from .mondrian import (
    MondrianCalibration,
    PrivateGroupSizes,
    UninformativePredictionWarning,
    UnseenGroupWarning,
    calibrate_groups,
    group_records,
    groups_read,
    mondrian_privacy,
    planned_groups_read,
    warn_trivial_groups,
)
from .scores import BaseConformityScore, score_threshold, threshold_in_score_units

__all__ = ["BasePrivateConformal", "register_card_builder"]

#: Builds ``card_`` from a fitted estimator. The cards layer sits above the estimators
#: and registers it when imported (``import privconf_sklearn`` always does), so that the
#: estimators never import the cards package.
_CARD_BUILDER: Callable[[BasePrivateConformal], Any] | None = None


def register_card_builder(builder: Callable[[BasePrivateConformal], Any]) -> None:
    """Install the function behind :attr:`BasePrivateConformal.card_`.

    :mod:`privconf_sklearn.cards` registers
    :meth:`ContractCard.from_estimator <privconf_sklearn.cards.ContractCard.from_estimator>`
    when it is imported (``import privconf_sklearn`` always imports it), so that the
    estimators, a layer below the cards, never import them.

    Parameters
    ----------
    builder : callable
        ``builder(estimator)`` returns the card of a fitted estimator.
    """
    global _CARD_BUILDER
    _CARD_BUILDER = builder


def _estimator_has(attr: str):
    """For ``available_if``: the fitted (or, before fit, the given) estimator has ``attr``."""

    def check(self) -> bool:
        return hasattr(getattr(self, "estimator_", self.estimator), attr)

    return check


#: The module of scikit-learn's default scorer (``_PassthroughScorer``, scikit-learn
#: 1.6 to 1.9), which a search uses when ``scoring`` is None: it calls
#: ``estimator.score``. No other scikit-learn code calls ``score`` through a scorer.
_DEFAULT_SCORER_MODULE = "sklearn.metrics._scorer"
#: Default scorers already warned about: a search makes one and calls it on every
#: candidate and fold, so it warns once per search (per worker process with n_jobs).
_WARNED_SCORERS: weakref.WeakSet = weakref.WeakSet()


def warn_if_default_scorer(estimator: object, model_score: str) -> None:
    """Warn if scikit-learn's default scorer called ``estimator.score`` (``scoring=None``).

    The estimators' ``score`` is the wrapped model's ``model_score`` (accuracy, R^2),
    which ``alpha``, the mechanism and its budget do not change: a search ranking by it
    sees ties and keeps the first candidate. A direct call (e.g. ``pcc.score(X, y)`` to
    read the model's accuracy) does not warn, and a search warns once, not on every
    candidate and fold. To be called from ``score`` itself: the frame two levels up is
    the one that called ``score``.
    """
    caller = sys._getframe(2)  # 0: this function, 1: score, 2: the caller of score
    if caller.f_globals.get("__name__") != _DEFAULT_SCORER_MODULE:
        return
    scorer = caller.f_locals.get("self")
    if scorer is not None:
        if scorer in _WARNED_SCORERS:
            return
        _WARNED_SCORERS.add(scorer)
    name = type(estimator).__name__
    warn_at_caller(
        f"{name}.score is the wrapped model's {model_score}: alpha, the mechanism and its "
        "privacy budget do not change it, so a search ranking by it (scoring=None) sees "
        "ties and keeps the first candidate. Pass scoring= with the scorers of "
        "privconf_sklearn.metrics (sets: set_coverage_scorer, neg_mean_set_size_scorer, "
        "informative_rate_scorer; intervals: interval_coverage_scorer, "
        "neg_mean_interval_width_scorer, informative_rate_scorer; risk control: "
        "neg_mean_loss_scorer, neg_mean_set_size_scorer), or a scikit-learn "
        "scoring name (e.g. 'accuracy', 'r2') to rank by the model on purpose.",
        DefaultScoreWarning,
    )


class DefaultScoreWarningMixin:
    """The wrapped model's ``score``, warning when a search ranks by it.

    First among the bases of an estimator (before ``ClassifierMixin`` or
    ``RegressorMixin``, whose ``score`` it calls); ``_model_score`` names that score.
    """

    _model_score: ClassVar[str]

    def score(self, X, y, sample_weight=None) -> float:
        """The wrapped model's accuracy (classifiers) or R^2 (regressors) on ``(X, y)``.

        scikit-learn's ``score``, not a conformal metric: ``alpha``, the mechanism and its
        budget do not change it. When a search calls it as its default score
        (``scoring=None``) it warns (:class:`~privconf_sklearn.metrics.DefaultScoreWarning`):
        rank candidates by the scorers of :mod:`privconf_sklearn.metrics` instead
        (:doc:`/user_guide/model_selection`; for a risk control,
        :func:`~privconf_sklearn.metrics.neg_mean_set_size_scorer` beside
        :func:`~privconf_sklearn.metrics.neg_mean_loss_scorer`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Test features.
        y : array-like of shape (n_samples,) or (n_samples, n_labels)
            True labels or targets (a 2-d indicator for a multilabel risk control).
        sample_weight : array-like of shape (n_samples,), default=None
            Sample weights.

        Returns
        -------
        float
            Accuracy or R^2 of ``predict(X)``.
        """
        warn_if_default_scorer(self, self._model_score)
        return super().score(X, y, sample_weight=sample_weight)  # type: ignore[misc]


def common_constraints(score_aliases: dict, mondrian_options: tuple[str, ...]) -> dict:
    """The constraints table shared by the classifier and the regressor."""
    mondrian: list = [None, callable]
    if mondrian_options:
        mondrian.insert(1, StrOptions(set(mondrian_options)))
    return {
        "estimator": "no_validation",  # checked by _check_estimator_kind and the score
        "mechanism": [QuantileMechanism],
        "alpha": [Interval(Real, 0.0, 1.0, closed="neither")],
        "conformity_score": [StrOptions(set(score_aliases)), BaseConformityScore],
        "mondrian": mondrian,
        "group_sizes": [None, StrOptions({"public"}), PrivateGroupSizes],
        "adjacency": [StrOptions({"replace-one", "add/remove"})],
        "prefit": ["boolean"],
        "calibration_size": [  # a fraction of the rows, or a number of rows
            Interval(RealNotInt, 0.0, 1.0, closed="neither"),
            Interval(Integral, 1, None, closed="left"),
        ],
        "random_state": [
            None,
            Interval(Integral, 0, None, closed="left"),
            np.random.RandomState,
            np.random.Generator,
        ],
        "accountant": LEDGER,
    }


class BasePrivateConformal(MetaEstimatorMixin, BaseEstimator, metaclass=ABCMeta):
    """Shared implementation of the private conformal wrappers.

    Parameters are documented on the concrete classes
    (:class:`~privconf_sklearn.PrivateConformalClassifier`,
    :class:`~privconf_sklearn.PrivateConformalRegressor`).
    """

    #: Mapping from the string aliases accepted by ``conformity_score`` to score factories.
    _score_aliases: dict[str, Any] = {}
    #: One constraints table per class, checked by :meth:`start_calibration`.
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

    def _warn_about_score(self, score: BaseConformityScore, estimator) -> None:
        """Subclass hook: warn about a score that suits the task poorly (public only)."""

    # ------------------------------------------------------------- validation
    def _validated_params(self) -> dict:
        """Every parameter checked against :attr:`_parameter_constraints`, in canonical form.

        The one validation of a fit (:meth:`start_calibration`); the helpers get its result.
        """
        return validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )

    def _resolve_score(self, params: dict) -> BaseConformityScore:
        """A fresh score object from the validated ``conformity_score``."""
        score = params["conformity_score"]
        return self._score_aliases[score]() if isinstance(score, str) else clone(score)

    @staticmethod
    def _resolve_mechanism(params: dict) -> QuantileMechanism:
        """A copy of the validated ``mechanism``."""
        return clone(params["mechanism"])

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

    # ------------------------------------------------------------ calibration
    def start_calibration(self) -> CalibrationRun:
        """Start a calibration: validate every parameter and check the budget; read no data.

        The first step of every calibration (:meth:`fit`, :meth:`fit_calibrate`,
        :func:`privconf_sklearn.dask.fit_calibrate`), public so that scores computed
        elsewhere can be calibrated by the same steps: see :mod:`privconf_sklearn.base`.
        The budget is checked for the most this configuration can cost (every Mondrian
        group read, a feasible request), so that a calibration the ledger cannot cover is
        refused before a model is fitted; the exact cost is reserved later, once the
        public sizes are known (:meth:`~privconf_sklearn.base.CalibrationRun.reserve`).

        Returns
        -------
        CalibrationRun
            The validated parameters, a fresh conformity score and mechanism, and the
            planned guarantee; its methods are the remaining steps.

        Raises
        ------
        TypeError, ValueError
            For a bad parameter (including the mechanism's own).
        RuntimeError
            If the ledger cannot cover the planned guarantee (the ledger's own error).
        """
        params = self._validated_params()
        self._check_estimator_kind(self.estimator)
        score = self._resolve_score(params)
        mechanism = self._resolve_mechanism(params)
        guarantee = mechanism.privacy_guarantee()  # validates the mechanism's parameters
        declared_groups = self._check_mondrian(params, mechanism)
        if params["mondrian"] is None:
            planned = guarantee.under(params["adjacency"])
        else:
            planned = mondrian_privacy(mechanism, params["group_sizes"], params["adjacency"])
        ledger = resolve_ledger(self.accountant)
        ledger.check(*planned.accountant_spend())
        return CalibrationRun(self, params, score, mechanism, ledger, planned, declared_groups)

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
        if isinstance(size, Integral) and size >= n:
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
        run = self.start_calibration()
        run.require_targets(y)
        if run.params["prefit"]:
            if fit_params:
                raise ValueError(
                    f"fit parameters {sorted(fit_params)} were given but prefit=True: the "
                    "estimator is not refitted."
                )
            return self._calibrate(run, None, X, y, groups)
        _check_same_length(X, y, groups)
        X, y, groups = indexable(X, y, groups)
        (X_train, y_train), (X_cal, y_cal, groups_cal) = self._split(
            X, y, groups, run.params["calibration_size"]
        )
        estimator = clone(self.estimator).fit(X_train, y_train, **fit_params)
        return self._calibrate(run, estimator, X_cal, y_cal, groups_cal)

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
        run = self.start_calibration()
        run.require_targets(y)
        return self._calibrate(run, None, X, y, groups)

    def _calibrate(self, run: CalibrationRun, model, X, y, groups):
        """Calibrate on rows held in memory, through the steps of ``run``.

        Everything after the parameters and the budget were checked
        (:meth:`start_calibration`) and the model fitted. The steps, in the order that
        makes the privacy accounting hold (see :mod:`privconf_sklearn.base`):

        1. The model is checked against the score (``run.use_model``; ``model=None``
           takes the prefit estimator). No calibration row is read.
        2. The inputs are checked, data read but no score computed: lengths, an empty
           set, agent ids against the mechanism, every target (encoded once, kept for the
           scores), Mondrian groups against their declaration.
        3. The exact spend is reserved on the ledger from public quantities only: the
           number of rows and the agents' sizes (``run.reserve``), or the Mondrian
           groups' sizes (:meth:`_reserve_groups`). A refused reservation raises here,
           before the model sees a calibration row.
        4. Only now: the model's outputs, the conformity scores, the public range
           (``run.fix_score_range``), the scores mapped to [0, 1].
        5. The release and its records (``run.release``, or one release per Mondrian
           group in :meth:`_release_groups`); attributes are set only at the end, so an
           error leaves the estimator as it was (the spend stays reserved).

        :func:`privconf_sklearn.dask.fit_calibrate` runs the same steps on scores
        computed block by block, which is why its release equals this one.
        """
        scorer = run.use_model(model)
        n = _check_same_length(X, y, groups)
        X, y, groups = indexable(X, y, groups)
        if n == 0:
            raise ValueError("The calibration set is empty: calibration needs at least one row.")
        mondrian = run.params["mondrian"]
        if mondrian is not None and groups is not None:
            raise ValueError(
                "groups (agent ids) is for federated mechanisms; Mondrian groups come from "
                "the mondrian parameter."
            )
        targets = scorer.encode_targets(y)
        if mondrian is not None:
            return self._calibrate_groups(run, scorer, X, targets)
        groups = run.mechanism._check_groups(groups, n)
        run.reserve(n, None if groups is None else tuple(agent_labels(groups)[2].tolist()))
        raw_scores = scorer.conformity_scores(X, targets)
        mapped = run.fix_score_range(lambda: _range_of(raw_scores)).map_to_unit(raw_scores)
        return run.release(
            ScoreArray(mapped.unit, groups),
            clipping=mapped.clipping(),
            largest_covered=mapped.largest_covered,
        )

    def _calibrate_groups(self, run: CalibrationRun, scorer: CalibrationScorer, X, targets):
        """Steps 3 to 5 of :meth:`_calibrate` for Mondrian calibration (in memory only).

        The group of every row is known and checked before the reservation, which is the
        composed guarantee of the groups' releases (:meth:`_reserve_groups`).
        """
        n = targets.shape[0]
        index, codes = self._group_codes(run, X, targets, scorer.model, n)
        self._reserve_groups(run, index, codes)
        raw_scores = scorer.conformity_scores(X, targets)
        mapped = run.fix_score_range(lambda: _range_of(raw_scores)).map_to_unit(raw_scores)
        record = run._range_record(mapped.below, mapped.above, n, mapped.clipped)
        return self._release_groups(run, index, codes, mapped, record)

    def _group_codes(self, run: CalibrationRun, X, encoded, estimator, n: int):
        """The Mondrian group index and every calibration row's group code."""
        mondrian = run.params["mondrian"]
        row_groups, group_list = self._mondrian_row_groups(mondrian, X, encoded, estimator, n)
        return index_rows(row_groups, group_list or run.declared_groups)

    def _reserve_groups(self, run: CalibrationRun, index: GroupIndex, codes: np.ndarray) -> None:
        """Reserve a Mondrian calibration's composed guarantee, atomically on the ledger.

        Public sizes: a group's release reads its rows iff the mechanism's certificate
        at the group's size is feasible; private sizes: the size release reads every
        group (:func:`~privconf_sklearn.mondrian.planned_groups_read`).
        """
        params, mechanism = run.params, run.mechanism
        counts = np.bincount(codes, minlength=len(index.group_ids))
        sizes = params["group_sizes"]
        n_read = planned_groups_read(mechanism, sizes, params["alpha"], counts)
        release = mondrian_privacy(
            mechanism, sizes, params["adjacency"], n_groups_read=n_read, n_groups=len(counts)
        )
        run._reserve_exactly(release)

    def _release_groups(
        self,
        run: CalibrationRun,
        index: GroupIndex,
        codes: np.ndarray,
        mapped: MappedScores,
        bounds_record,
    ) -> BasePrivateConformal:
        """One release per Mondrian group, their records, composed guarantee and attributes.

        Step 5 of :meth:`_calibrate` for Mondrian calibration, after the composed
        guarantee was reserved: each group's release on its own rows (or on a fixed
        number of them, with private sizes: :func:`~privconf_sklearn.mondrian.calibrate_groups`),
        each completed with the estimator's records for its rows; the warning about
        trivial groups; the composed guarantee of the releases actually made (marked as
        broken if the score range came from the data), which :meth:`_set_fitted` checks
        against the reservation before setting any attribute.
        """
        run._start_release()
        params, mechanism = run.params, run.mechanism
        alpha, sizes = params["alpha"], params["group_sizes"]
        n = mapped.unit.shape[0]
        broken = self._broken_privacy_reason(bounds_record)
        releases, details, owner = calibrate_groups(
            mechanism,
            mapped.unit,
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
        warn_trivial_groups(records)
        privacy = mondrian_privacy(
            mechanism,
            sizes,
            params["adjacency"],
            n_groups_read=groups_read(final, sizes),
            n_groups=len(final),
        )
        private_sizes = isinstance(sizes, PrivateGroupSizes)
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
        low, high = run.score_range  # type: ignore[misc]
        fitted: dict[str, Any] = {
            "groups_": _object_array(index.group_ids),
            "group_thresholds_": np.array(
                [
                    threshold_in_score_units(
                        c, mapped.clipped[r.rows], mapped.unit[r.rows], low, high
                    )
                    for c, r in zip(final, releases, strict=True)
                ]
            ),
            "mondrian_": params["mondrian"],
        }
        return self._set_fitted(run, grouped, final, bounds_record, fitted)

    def _complete_release(
        self,
        run: CalibrationRun,
        calibration: Calibration,
        bounds_record,
        largest_covered: Callable[[float], float | None],
    ) -> BasePrivateConformal:
        """Everything after the mechanism's release (without Mondrian groups).

        Called by :meth:`CalibrationRun.release <privconf_sklearn.base.CalibrationRun.release>`
        for every path: the estimator-level records, the privacy guarantee under
        ``adjacency`` (broken if the score range came from the data), the threshold in
        score units (``largest_covered(t)``: the largest clipped calibration score whose
        image is at most ``t``, or None; see
        :func:`~privconf_sklearn.scores.threshold_in_score_units`), the warnings, the
        check against the reservation and the fitted attributes.
        """
        low, high = run.score_range  # type: ignore[misc]
        broken = self._broken_privacy_reason(bounds_record)
        calibration = self._finish_release(calibration, bounds_record, slice(None))
        privacy = calibration.privacy.under(run.params["adjacency"])
        calibration = replace(
            calibration, privacy=privacy if broken is None else privacy.broken(broken)
        )
        fitted: dict[str, Any] = {
            "threshold_": score_threshold(calibration, largest_covered, low, high)
        }
        return self._set_fitted(run, calibration, [calibration], bounds_record, fitted)

    def _set_fitted(
        self,
        run: CalibrationRun,
        calibration: Calibration | MondrianCalibration,
        final: list[Calibration],
        bounds_record,
        fitted: dict[str, Any],
    ) -> BasePrivateConformal:
        """Check the reservation, warn, then set every attribute."""
        low, high = run.score_range  # type: ignore[misc]
        run._check_reserved(calibration)
        self._warn_about_releases(final, bounds_record)

        fitted.update(
            estimator_=run.model,
            score_=run.score,
            mechanism_=run.mechanism,
            calibration_=calibration,
            score_bounds_=(float(low), float(high)),
        )
        model = run.model
        for name in ("n_features_in_", "feature_names_in_"):
            if hasattr(model, name):
                fitted[name] = getattr(model, name)
        fitted.update(self._extra_fitted_attributes(model, calibration))
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
        size: int | None = validate_params(
            {"batch_size": [None, Interval(Integral, 1, None, closed="left")]},
            {"batch_size": batch_size},
            f"{type(self).__name__}.predict_set",
        )["batch_size"]
        n = _num_samples(X)
        unseen: dict = {}
        if size is None or n == 0:
            result = self._sets(X, unseen)
        else:  # n > 0: at least one batch; the result is allocated from the first
            batches = gen_batches(n, size)
            first = next(batches)
            part = self._sets(_safe_indexing(X, first), unseen)
            result = np.empty((n, *part.shape[1:]), dtype=part.dtype)
            result[first] = part
            for rows in batches:
                result[rows] = self._sets(_safe_indexing(X, rows), unseen)
        if unseen:
            shown = list(unseen)[:10]
            warn_at_caller(
                f"{sum(unseen.values())} test rows fall in groups without a calibrated "
                f"threshold ({shown}{' ...' if len(unseen) > 10 else ''}): they get the "
                "trivial set (every label / the widest interval).",
                UnseenGroupWarning,
            )
        elif n > 0 and self._every_output_trivial(result, X):
            warn_at_caller(self._trivial_outputs_message(n), UninformativePredictionWarning)
        return result

    def _trivial_outputs_message(self, n: int) -> str:
        """Why every one of ``n`` outputs is trivial: the release, or the model's scores."""
        head = (
            f"Every one of the {n} prediction {self._output_name} is trivial "
            f"({self._trivial_output}): "
        )
        if self.calibration_.informative:
            return head + (
                "the calibrated threshold is informative, but the model's scores for these "
                "inputs all lie beyond it (a model that does not separate them, or whose "
                "scores sit at the top of the range): check the model on non-sensitive "
                "data, for example with SplitConformal."
            )
        reason = getattr(self.calibration_, "reason", "").strip()
        if reason:
            reason = reason[:1].upper() + reason[1:] + ("" if reason.endswith(".") else ".") + " "
        return head + (
            f"the calibration released {self._trivial_release}. {reason}See calibration_ "
            f"and {self._forecast_call} for why, and how many rows would help."
        )

    #: What :meth:`predict_set` returns, what a trivial one is, what the calibration
    #: released to make it so and the forecast to ask, for its warning.
    _output_name = "sets"
    _trivial_output = "every label"
    _trivial_release = "the top of the public range"
    _forecast_call = "mechanism.forecast(n, alpha)"

    def _every_output_trivial(self, outputs: np.ndarray, X) -> bool:
        """Whether every returned set or interval is trivial (reads only test inputs)."""
        return bool(np.all(outputs))

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
        inner = inner_input_tags(self.estimator)  # None: refused by name at fit time
        if inner is not None:
            tags.input_tags.allow_nan = inner.allow_nan
            tags.input_tags.sparse = inner.sparse
            tags.input_tags.categorical = inner.categorical
            tags.input_tags.string = inner.string
        return tags


def check_is_estimator(estimator, name: str, owner: str) -> None:
    """Raise ``InvalidParameterError`` naming ``name`` unless scikit-learn reads its tags.

    scikit-learn's own checks (``is_classifier``, ``get_tags``) need an estimator that
    defines ``__sklearn_tags__`` (a subclass of ``sklearn.base.BaseEstimator``); without
    this check ``None``, a string or a duck-typed model escapes as scikit-learn's
    internal ``AttributeError`` (scikit-learn >= 1.7) or a later, vaguer error (1.6,
    which falls back to default tags).
    """
    if inner_input_tags(estimator) is None:
        text = repr(estimator)
        raise InvalidParameterError(
            f"The {name!r} parameter of {owner} must be a scikit-learn estimator (a "
            f"subclass of sklearn.base.BaseEstimator, e.g. a fitted LogisticRegression); "
            f"got {type(estimator).__name__} {text if len(text) <= 60 else text[:57] + '...'}."
        ) from None


def inner_input_tags(estimator):
    """The input tags of a wrapped estimator, or None if it defines no scikit-learn tags."""
    if not hasattr(type(estimator), "__sklearn_tags__"):
        return None
    try:
        return get_tags(estimator).input_tags
    except AttributeError:
        return None


def _object_array(values) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = list(values)
    return array


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


def _range_of(scores: np.ndarray) -> tuple[float, float]:
    """``(min, max)`` of raw scores in memory (for a range taken from the data)."""
    return float(scores.min()), float(scores.max())
