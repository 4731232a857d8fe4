"""Private conformal risk control for multilabel (and single-label) classifiers.

Angelopoulos, Bates, Fisch, Lei and Schuster, "Conformal Risk Control" (ICLR 2024):
the sets ``{k : p_k(x) > t}`` of a fitted classifier, with the threshold ``t`` chosen on
a calibration set from a public grid so that the expected loss of a new point (e.g. the
share of its true labels the set misses) is at most ``alpha``. The threshold is released
by a :class:`~privconf_sklearn.mechanisms.RiskControlMechanism`:
:class:`~privconf_sklearn.mechanisms.ExponCRC` (pure epsilon-DP) or
:class:`~privconf_sklearn.mechanisms.SplitCRC` (no privacy; MAPIE's
``MultiLabelClassificationController(method="crc")`` threshold, bit for bit).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from numbers import Real
from typing import Any, cast

import numpy as np
from sklearn.base import ClassifierMixin, clone, is_regressor
from sklearn.utils import indexable
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from ._base import (
    BasePrivateConformal,
    DefaultScoreWarningMixin,
    _check_same_length,
    _estimator_has,
    _object_array,
    check_is_estimator,
    common_constraints,
)
from ._calibration_run import CalibrationRun
from ._groups import group_ids_of_rows, index_rows
from ._param_validation import Interval, InvalidParameterError, StrOptions, validate_params
from ._random import check_noise_source
from .mechanisms import RiskCalibration, RiskCertificate, RiskControlMechanism, RiskForecast
from .mechanisms.risk_control import warn_about_release
from .mondrian import PrivateGroupSizes, groups_read, mondrian_privacy, private_size_rows
from .privacy import PrivacyGuarantee
from .scores import CallableLoss, FalseNegativeRate, SetLoss

__all__ = [
    "MondrianRiskCalibration",
    "PrivateRiskControlClassifier",
    "candidate_thresholds",
    "private_sizes_risk_bound",
]

#: MAPIE 1.6's default grid (``predict_params=np.arange(0, 1, 0.01)``).
DEFAULT_THRESHOLDS = np.arange(0, 1, 0.01)

#: Largest grid accepted (the curve and the release are O(m) per calibration).
MAX_THRESHOLDS = 10**5


def candidate_thresholds(thresholds) -> np.ndarray:
    """The candidates, least conservative first: thresholds in decreasing order.

    ``None`` is MAPIE's grid ``np.arange(0, 1, 0.01)``. When every threshold is at least
    0, ``-inf`` (the set of every label) is appended as the most conservative
    candidate: the guarantee needs a candidate whose loss is 0.

    Raises
    ------
    ValueError
        Unless ``thresholds`` is a one-dimensional array of distinct finite reals (not
        booleans), with 1 to 10^5 entries.
    """
    values = DEFAULT_THRESHOLDS if thresholds is None else np.asarray(thresholds)
    if (
        values.ndim != 1
        or not 1 <= values.shape[0] <= MAX_THRESHOLDS
        or values.dtype.kind not in "iuf"
        or not np.isfinite(values).all()
    ):
        raise ValueError(
            "thresholds must be None or a one-dimensional array of 1 to "
            f"{MAX_THRESHOLDS} finite real numbers; got {_preview(thresholds)}."
        )
    ordered = np.sort(values.astype(np.float64))[::-1]
    if (np.diff(ordered) == 0).any():
        raise ValueError(
            f"thresholds must be distinct; {np.unique(ordered[:-1][np.diff(ordered) == 0])[:5]}"
            " appear more than once."
        )
    return ordered if ordered[-1] < 0 else np.append(ordered, -np.inf)


def _preview(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def private_sizes_risk_bound(alpha: float, beta: float, loss_bound: float) -> float:
    """``alpha + beta (B - alpha)``: a group's risk bound with private group sizes.

    With :class:`~privconf_sklearn.mondrian.PrivateGroupSizes`, a group's release reads
    a uniformly random subset of its rows except with probability at most ``beta``
    (then it is padded), so its expected loss is at most ``(1 - beta) alpha + beta B``
    (the user guide, "Conformal risk control", gives the proof).

    Raises
    ------
    InvalidParameterError
        Unless ``0 < alpha < loss_bound`` and ``0 < beta < 1`` (reals, not bools).
    """
    checked = validate_params(
        {
            "alpha": [Interval(Real, 0.0, None, closed="neither")],
            "beta": [Interval(Real, 0.0, 1.0, closed="neither")],
            "loss_bound": [Interval(Real, 0.0, None, closed="neither")],
        },
        {"alpha": alpha, "beta": beta, "loss_bound": loss_bound},
        "private_sizes_risk_bound",
    )
    alpha, beta, loss_bound = (float(checked[k]) for k in ("alpha", "beta", "loss_bound"))
    if not alpha < loss_bound < math.inf:
        raise InvalidParameterError(
            f"private_sizes_risk_bound: alpha must lie in (0, loss_bound) and loss_bound be "
            f"finite; got alpha={alpha!r}, loss_bound={loss_bound!r}."
        )
    return alpha + beta * (loss_bound - alpha)


@dataclass(frozen=True)
class MondrianRiskCalibration:
    """Record of a Mondrian risk control: one release per group, and their joint privacy.

    Parameters
    ----------
    mechanism : str
        Name of the mechanism class used in every group.
    alpha : float
        Risk level, in every group.
    n_samples : int
        Number of calibration rows (all groups).
    groups : tuple of (group id, RiskCalibration)
        One release per group: each group present in the calibration data (public
        sizes), or each declared group, released on its private size ``m_g`` (private
        sizes; ``n_samples`` of the release).
    privacy : PrivacyGuarantee
        Guarantee of all releases together, sizes included
        (:func:`~privconf_sklearn.mondrian.mondrian_privacy`), under the estimator's
        ``adjacency``.
    group_sizes : "public" or PrivateGroupSizes, default="public"
        How the group sizes were treated.
    owner_diagnostics : dict, default={}
        With private sizes, the exact ``group_sizes``: NOT covered by the guarantee.
    group_risk_bounds : tuple of float
        Not a constructor argument: each group's bound on its expected loss. Public sizes:
        its release's ``risk_upper_bound``; private sizes:
        :func:`private_sizes_risk_bound` for a release that read rows, 0 for one chosen
        without reading (the set of every label).
    risk_upper_bound : float
        Not a constructor argument: the largest group bound, which also bounds the
        marginal risk of rows from calibrated groups.
    feasible, informative : bool
        Not constructor arguments: true iff true for every group.
    """

    mechanism: str
    alpha: float
    n_samples: int
    groups: tuple[tuple[Any, RiskCalibration], ...]
    privacy: PrivacyGuarantee
    group_sizes: Any = "public"
    owner_diagnostics: dict[str, Any] = field(default_factory=dict)
    group_risk_bounds: tuple[float, ...] = field(init=False)
    risk_upper_bound: float = field(init=False)
    feasible: bool = field(init=False)
    informative: bool = field(init=False)

    def __post_init__(self):
        releases = [release for _, release in self.groups]
        bounds = tuple(r.risk_upper_bound for r in releases)
        if isinstance(self.group_sizes, PrivateGroupSizes):
            beta = self.group_sizes.beta
            bounds = tuple(
                private_sizes_risk_bound(r.alpha, beta, r.loss_bound) if r.feasible else 0.0
                for r in releases
            )
        object.__setattr__(self, "group_risk_bounds", bounds)
        object.__setattr__(self, "risk_upper_bound", max(bounds))
        object.__setattr__(self, "feasible", all(r.feasible for r in releases))
        object.__setattr__(self, "informative", all(r.informative for r in releases))


def _check_label_count(model, n_labels: int) -> None:
    """The model has as many labels as ``y`` has columns, checked before any spend.

    ``classes_`` has one entry per output of a multi-output model.
    """
    classes = getattr(model, "classes_", None)
    if classes is None:
        return
    count = len(classes) if isinstance(classes, list) else int(np.shape(classes)[0])
    if count != n_labels:
        raise ValueError(
            f"{type(model).__name__} has {count} labels (classes_) but y has {n_labels}: "
            "give y the labels the model was fitted on."
        )


def _check_full_set_loss(loss: SetLoss, n_labels: int, multilabel: bool) -> None:
    """The loss is 0 for the set of every label on the canonical rows (public, no data).

    The guarantee assumes it for every possible row; here it is checked, before any row
    is read, for each single true label (and every label true, for a multilabel task),
    so that a loss that breaks it (e.g. a constant cost) is refused before any budget is
    spent rather than found out on the calibration rows.
    """
    rows = np.eye(n_labels, dtype=bool)
    if multilabel:
        rows = np.vstack([rows, np.ones((1, n_labels), dtype=bool)])
    try:
        curve = loss.loss_curve(np.zeros(rows.shape), rows, np.array([-np.inf]))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "The loss must score the set of every label for a row with a single true "
            f"label (or every label true, multilabel); it failed there: {exc}"
        ) from exc
    if curve.sums[0] > 0:
        raise ValueError(
            f"The loss must be 0 for the set of every label (the risk guarantee assumes "
            f"it for every row), but {type(loss).__name__} gives a positive loss there for "
            "a row with a single true label or with every label true: fix the loss."
        )


def _padding_row(n_labels: int, multilabel: bool) -> np.ndarray:
    """The true labels of a padding row: the first label (single-label), or every label.

    Chosen without looking at the data; with probability 0 for every label, the row is
    missed at every threshold >= 0 (the FNR's loss ``B`` there, 0 for every label).
    """
    return np.ones((1, n_labels), dtype=bool) if multilabel else np.eye(1, n_labels, dtype=bool)


def _check_padding_row(loss: SetLoss, n_labels: int, thresholds: np.ndarray) -> None:
    """The loss scores a padding row (public: checked before any row is read)."""
    row = _padding_row(n_labels, loss.multilabel_)
    try:
        loss.loss_curve(np.zeros(row.shape), row, thresholds)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            "With PrivateGroupSizes a group may be padded with rows whose "
            f"{'every label is' if loss.multilabel_ else 'first label is'} true, at "
            f"probability 0; the loss must score such a row: {exc}"
        ) from exc


def _private_size_curve(loss: SetLoss, rows_data, thresholds, rows, size: int, noise):
    """The loss curve of ``size`` rows of a group (:class:`PrivateGroupSizes`).

    A uniformly random subset of the group's ``rows``, or all of them and padding rows
    (:func:`_padding_row`). Its owner diagnostics count the rows of the whole group that
    break an assumption, read or not (owner-side, not released).
    """
    outputs, targets = rows_data
    chosen, n_padding = private_size_rows(rows, size, noise)
    padding = np.repeat(_padding_row(targets.shape[1], loss.multilabel_), n_padding, axis=0)
    curve = loss.loss_curve(
        np.concatenate([outputs[chosen], np.zeros(padding.shape)]),
        np.concatenate([targets[chosen], padding]),
        thresholds,
    )
    if rows.shape[0] == 0:
        return curve
    whole = loss.loss_curve(outputs[rows], targets[rows], thresholds)
    return replace(curve, owner_diagnostics=dict(whole.owner_diagnostics))


def _empty_group_release(run: CalibrationRun, n_candidates: int) -> RiskCalibration:
    """The every-label release of a group whose private size is 0 (no row read)."""
    loss: SetLoss = run.score  # type: ignore[assignment]
    beta = run.params["group_sizes"].beta
    return RiskCalibration(
        mechanism=type(run.mechanism).__name__,
        index=n_candidates - 1,
        n_candidates=n_candidates,
        n_samples=0,
        alpha=float(run.params["alpha"]),
        loss_bound=loss.bound(),
        privacy=PrivacyGuarantee.untouched(
            "The group's private size is 0: every label, chosen without reading its rows."
        ).under(run.params["adjacency"]),
        risk_upper_bound=0.0,
        feasible=False,
        reason=f"the private lower bound of the group's size is 0 (beta = {beta}).",
        details={"resolution": 1},
    )


class PrivateRiskControlClassifier(DefaultScoreWarningMixin, ClassifierMixin, BasePrivateConformal):
    """Prediction sets controlling a risk (e.g. the false-negative rate), privately.

    Wraps a fitted classifier whose ``predict_proba`` gives per-label probabilities: a
    multilabel model (scikit-learn's ``MultiOutputClassifier``, a multi-output forest, an
    ``MLPClassifier`` fitted on an indicator matrix) or a single-label classifier. The
    set of ``x`` is ``{k : p_k(x) > threshold_}``, MAPIE 1.6's convention, with the
    threshold released from the public grid ``thresholds`` by ``mechanism`` so that a new
    exchangeable point's expected loss is at most ``calibration_.risk_upper_bound``
    (``<= alpha``): conformal risk control (Angelopoulos, Bates, Fisch, Lei and Schuster
    2024). With ``ExponCRC(epsilon)`` the threshold is ``epsilon``-DP of the calibration
    set; with ``SplitCRC()`` it equals MAPIE's ``MultiLabelClassificationController(
    method="crc", risk="recall")`` on the same grid.

    The guarantee assumes, for every row: the loss lies in ``[0, loss_bound]``, does not
    increase as the set grows, and is 0 for the set of every label (the most
    conservative candidate, added to the grid when every threshold is >= 0). The
    false-negative rate meets all three.

    Parameters
    ----------
    estimator : classifier
        Fitted (``prefit=True``) or to be fitted (``prefit=False``) classifier with
        ``predict_proba``.
    mechanism : RiskControlMechanism
        ``ExponCRC(epsilon)`` or ``SplitCRC()``. Keyword-only and without default, so
        privacy is always a visible choice.
    alpha : float, default=0.1
        Risk level, in ``(0, loss_bound)``.
    loss : "fnr", SetLoss or callable, default="fnr"
        ``"fnr"``: :class:`~privconf_sklearn.scores.FalseNegativeRate`, the share of a
        row's true labels missing from its set (MAPIE's ``risk="recall"`` controls
        ``1 - recall``, the same loss); for single-label ``y``, the miscoverage. A
        callable ``loss(y_true, y_set) -> (n_samples,)`` of the bool indicator matrices
        of the true labels and of the set (:class:`~privconf_sklearn.scores.CallableLoss`),
        e.g. a cost-weighted miss; it needs ``loss_bound``.
    loss_bound : float or None, default=None
        ``B`` of a callable loss (None for ``"fnr"`` and SetLoss objects).
    thresholds : array-like of shape (m,) or None, default=None
        The public grid of thresholds on ``p_k(x)``; None is MAPIE's
        ``np.arange(0, 1, 0.01)``. Chosen without looking at the calibration data.
    mondrian : None or callable, default=None
        A public function ``mondrian(X) -> group ids``: one threshold per group, and the
        risk bound within every group. Needs ``group_sizes``.
    group_sizes : None, "public" or PrivateGroupSizes, default=None
        With ``mondrian``: ``"public"`` (each group's size is disclosed, as the
        calibration size is) or :class:`~privconf_sklearn.mondrian.PrivateGroupSizes`
        with the public ``group_ids`` (the sizes are released with their own budget; each
        group's release reads that many of its rows, and its bound becomes
        :func:`~privconf_sklearn.risk_control.private_sizes_risk_bound`).
    adjacency : {"replace-one", "add/remove"}, default="replace-one"
        The neighbouring relation the privacy guarantee is stated under.
    prefit : bool, default=True
        If True, ``estimator`` is fitted and kept by reference, also through ``clone``;
        if False, ``fit`` fits a clone on part of the data and calibrates on the rest.
    calibration_size : float or int, default=0.3
        With ``prefit=False``: fraction or number of rows used for calibration.
    random_state : None, int, RandomState or Generator, default=None
        Privacy noise source (None: the operating system's cryptographic generator, the
        only production setting; a seed is for tests and examples). Also drives the
        ``prefit=False`` split.
    accountant : ledger or None, default=None
        Ledger checked before any data is read and charged after the release (None:
        diffprivlib's default accountant), as for the other wrappers.

    Attributes
    ----------
    estimator_ : classifier
        The fitted classifier used.
    classes_ : ndarray of shape (n_labels,)
        Column labels of :meth:`predict_set`: ``0..K-1`` for a multilabel ``y``, the
        classifier's ``classes_`` for single-label ``y``.
    score_ : SetLoss
        The loss used (named as the other wrappers name their score object).
    mechanism_ : RiskControlMechanism
        A copy of the mechanism used.
    calibration_ : RiskCalibration or MondrianRiskCalibration
        Released candidate, risk bound, privacy guarantee (under ``adjacency``).
    thresholds_ : ndarray of shape (m,)
        The candidates, least conservative first (decreasing; ``-inf`` is every label).
    threshold_ : float
        The released threshold, ``thresholds_[calibration_.index]``. Not set with
        ``mondrian``.
    groups_, group_thresholds_, mondrian_ :
        With ``mondrian``: the group ids, each group's threshold, the grouping.
    score_bounds_ : tuple of float
        ``(0.0, 1.0)``, the public range of the probabilities the thresholds apply to.
    n_features_in_, feature_names_in_ :
        Copied from the estimator when it has them.

    See Also
    --------
    privconf_sklearn.PrivateConformalClassifier : Sets with a coverage guarantee.

    Examples
    --------
    >>> from sklearn.datasets import make_multilabel_classification
    >>> from sklearn.linear_model import LogisticRegression
    >>> from sklearn.multioutput import MultiOutputClassifier
    >>> from privconf_sklearn import PrivateRiskControlClassifier
    >>> from privconf_sklearn.mechanisms import ExponCRC
    >>> X, Y = make_multilabel_classification(4000, n_classes=5, allow_unlabeled=False,
    ...                                       random_state=0)
    >>> model = MultiOutputClassifier(LogisticRegression()).fit(X[:2000], Y[:2000])
    >>> crc = PrivateRiskControlClassifier(model, mechanism=ExponCRC(epsilon=1.0), alpha=0.1,
    ...                                    random_state=0).fit_calibrate(X[2000:], Y[2000:])
    >>> crc.predict_set(X[:2]).shape
    (2, 5)
    >>> bool(crc.calibration_.risk_upper_bound <= 0.1), crc.calibration_.privacy.epsilon
    (True, 1.0)
    """

    _model_score = "accuracy"
    _score_aliases = {"fnr": FalseNegativeRate}
    _parameter_constraints = {
        **{
            name: constraint
            for name, constraint in common_constraints({}, ()).items()
            if name not in ("conformity_score", "mechanism", "alpha", "group_sizes")
        },
        "mechanism": [RiskControlMechanism],
        "alpha": [Interval(Real, 0.0, None, closed="neither")],
        "loss": [StrOptions({"fnr"}), SetLoss, callable],
        "loss_bound": [None, Interval(Real, 0.0, None, closed="neither")],
        "thresholds": [None, list, tuple, np.ndarray],
        "group_sizes": [None, StrOptions({"public"}), PrivateGroupSizes],
    }
    _fitted_attribute_names = (
        *BasePrivateConformal._fitted_attribute_names,
        "classes_",
        "thresholds_",
    )

    def __init__(
        self,
        estimator,
        *,
        mechanism,
        alpha: float = 0.1,
        loss="fnr",
        loss_bound=None,
        thresholds=None,
        mondrian=None,
        group_sizes=None,
        adjacency="replace-one",
        prefit: bool = True,
        calibration_size=0.3,
        random_state=None,
        accountant=None,
    ):
        self.estimator = estimator
        self.mechanism = mechanism
        self.alpha = alpha
        self.loss = loss
        self.loss_bound = loss_bound
        self.thresholds = thresholds
        self.mondrian = mondrian
        self.group_sizes = group_sizes
        self.adjacency = adjacency
        self.prefit = prefit
        self.calibration_size = calibration_size
        self.random_state = random_state
        self.accountant = accountant

    # ------------------------------------------------------------ the hooks
    def _check_estimator_kind(self, estimator) -> None:
        check_is_estimator(estimator, "estimator", type(self).__name__)
        if is_regressor(estimator):
            raise TypeError(
                f"estimator must be a classifier; got the regressor {type(estimator).__name__}."
            )

    def _encode_targets(self, y, estimator) -> np.ndarray:
        """Not used: the loss object encodes the targets.

        :meth:`SetLoss.encode_targets` also records whether they are multilabel.
        """
        raise NotImplementedError("the loss object encodes the targets")

    def _resolve_score(self, params: dict) -> SetLoss:  # type: ignore[override]
        """The loss object, with ``alpha``, ``loss_bound`` and ``thresholds`` checked."""
        loss, bound = params["loss"], params["loss_bound"]
        if isinstance(loss, str) or isinstance(loss, SetLoss):
            if bound is not None:
                raise ValueError(
                    f"loss_bound is the bound of a callable loss; loss={loss!r} has its own "
                    f"(got loss_bound={bound!r})."
                )
            resolved = FalseNegativeRate() if isinstance(loss, str) else clone(loss)
        elif bound is None:
            raise ValueError(
                "a callable loss needs loss_bound, the largest loss of one row (the risk "
                "guarantee and the privacy analysis depend on it)."
            )
        else:
            resolved = CallableLoss(loss, bound)
        largest = resolved.bound()
        if not params["alpha"] < largest:
            raise ValueError(
                f"alpha must lie in (0, loss_bound) = (0, {largest!r}); got alpha="
                f"{params['alpha']!r}."
            )
        candidate_thresholds(params["thresholds"])
        return resolved

    @staticmethod
    def _resolve_mechanism(params: dict) -> RiskControlMechanism:  # type: ignore[override]
        """A copy of the validated ``mechanism``."""
        return clone(params["mechanism"])

    def _full_set_threshold(self) -> float:
        """Rows of groups without a release get every label."""
        return -np.inf

    def _public_range(self, score, data_range: Callable[[], tuple]):
        """``(0, 1)``: the thresholds apply to probabilities; public, never from the data."""
        return 0.0, 1.0, True

    # ------------------------------------------------------------ calibration
    def _calibrate(self, run: CalibrationRun, model, X, y, groups):
        """Calibrate through the steps of ``run``, in their privacy order.

        1. The model is checked against the loss (``run.use_model``). No row is read.
        2. The inputs are checked: lengths, an empty set, the targets (encoded once),
           the Mondrian group of every row.
        3. The exact spend is reserved on the ledger from public quantities only: every
           group's size (the calibration size without ``mondrian``), the number of
           labels, the grid and ``alpha`` fix each release's certificate, and a release
           reads its rows exactly when its certificate is feasible
           (:meth:`_reserve`).
        4. Only now: the model's probabilities, each group's loss curve, the releases.
        5. The records, checked against the reservation, and every fitted attribute at
           once (:meth:`_set_fitted`); an error leaves the estimator as it was.
        """
        run.use_model(model)
        n = _check_same_length(X, y)
        if groups is not None:
            raise ValueError(
                "groups (agent ids) is for federated mechanisms; risk control is central."
            )
        X, y = indexable(X, y)
        if n == 0:
            raise ValueError("The calibration set is empty: calibration needs at least one row.")
        loss: SetLoss = run.score  # type: ignore[assignment]
        targets = loss.encode_targets(y, run.model)
        thresholds = candidate_thresholds(run.params["thresholds"])
        if run.params["mondrian"] is None:
            index, codes = None, np.zeros(n, dtype=np.intp)
        else:
            row_groups = group_ids_of_rows(run.params["mondrian"], X, n)
            index, codes = index_rows(row_groups, run.declared_groups)
        mechanism: RiskControlMechanism = run.mechanism  # type: ignore[assignment]
        mechanism_params = mechanism._validated_params()  # once for the fit's release
        sizes = np.bincount(codes, minlength=1 if index is None else len(index))
        _check_label_count(run.model, targets.shape[1])
        _check_full_set_loss(loss, targets.shape[1], loss.multilabel_)
        if isinstance(run.params["group_sizes"], PrivateGroupSizes):
            _check_padding_row(loss, targets.shape[1], thresholds)
        self._reserve(run, mechanism_params, sizes, targets.shape[1], thresholds.shape[0])
        run.fix_score_range()
        outputs = loss.estimator_outputs(run.model, X)
        if outputs.shape[1] != targets.shape[1]:
            raise ValueError(
                f"predict_proba gives {outputs.shape[1]} labels but y has {targets.shape[1]}."
            )
        run._start_release()
        releases = self._releases(
            run, mechanism_params, (outputs, targets), thresholds, codes, sizes
        )
        classes = np.arange(targets.shape[1]) if loss.multilabel_ else run.model.classes_
        fitted: dict[str, Any] = {"thresholds_": thresholds, "classes_": np.asarray(classes)}
        if index is None:
            fitted["threshold_"] = float(thresholds[releases[0].index])
            return self._set_fitted(run, releases[0], releases, None, fitted)  # type: ignore[arg-type]
        group_sizes = run.params["group_sizes"]
        private = isinstance(group_sizes, PrivateGroupSizes)
        record = MondrianRiskCalibration(
            type(run.mechanism).__name__,
            run.params["alpha"],
            n,
            tuple(zip(index.group_ids, releases, strict=True)),
            mondrian_privacy(
                run.mechanism,  # type: ignore[arg-type]
                group_sizes,
                run.params["adjacency"],
                n_groups_read=groups_read(releases, group_sizes),  # type: ignore[arg-type]
                n_groups=len(releases),
            ),
            group_sizes=group_sizes if private else "public",
            owner_diagnostics={"group_sizes": [int(v) for v in sizes]} if private else {},
        )
        fitted.update(
            groups_=_object_array(index.group_ids),
            group_thresholds_=np.array([thresholds[r.index] for r in releases]),
            mondrian_=run.params["mondrian"],
        )
        return self._set_fitted(run, cast(Any, record), releases, None, fitted)  # type: ignore[arg-type]

    @staticmethod
    def _certificates(
        run: CalibrationRun, mechanism_params: dict, sizes, n_labels: int, n_candidates: int
    ) -> list[RiskCertificate]:
        """Each group's certificate, from its public size and resolution (no row read)."""
        loss: SetLoss = run.score  # type: ignore[assignment]
        mechanism: RiskControlMechanism = run.mechanism  # type: ignore[assignment]
        alpha, bound = run.params["alpha"], loss.bound()
        return [
            mechanism._risk_certificate(
                mechanism_params, size, alpha, n_candidates, bound, loss.resolution(size, n_labels)
            )
            for size in sizes.tolist()
        ]

    def _reserve(
        self,
        run: CalibrationRun,
        mechanism_params: dict,
        sizes: np.ndarray,
        n_labels: int,
        n_candidates: int,
    ) -> None:
        """Step 3: reserve the exact spend of the release(s) on the ledger, atomically.

        One release: its guarantee under ``adjacency`` if its certificate is feasible,
        zero loss otherwise (the most conservative candidate, chosen without reading a
        row). Mondrian groups: the composed guarantee of
        :func:`~privconf_sklearn.mondrian.mondrian_privacy`, for the groups whose
        certificate at their public size is feasible, or with private sizes for every
        group (the size release reads every group's count).
        """
        mechanism: RiskControlMechanism = run.mechanism  # type: ignore[assignment]
        adjacency, group_sizes = run.params["adjacency"], run.params["group_sizes"]
        if isinstance(group_sizes, PrivateGroupSizes):
            n_groups = int(sizes.shape[0])
            reserved = mondrian_privacy(
                mechanism,  # type: ignore[arg-type]
                group_sizes,
                adjacency,
                n_groups_read=n_groups,
                n_groups=n_groups,
            )
            run._reserve_exactly(reserved)
            return
        certificates = self._certificates(run, mechanism_params, sizes, n_labels, n_candidates)
        feasible = [certificate.feasible for certificate in certificates]
        if run.params["mondrian"] is not None:
            reserved = mondrian_privacy(
                mechanism,  # type: ignore[arg-type]
                "public",
                adjacency,
                n_groups_read=min(sum(feasible), 2),
                n_groups=len(feasible),
            )
        elif feasible[0]:
            reserved = mechanism._privacy_guarantee(mechanism_params).under(adjacency)
        else:
            reserved = PrivacyGuarantee.untouched(
                "Infeasible request, decided from public quantities: no data read."
            ).under(adjacency)
        run._reserve_exactly(reserved)

    def _releases(
        self, run: CalibrationRun, mechanism_params: dict, rows_data, thresholds, codes, sizes
    ):
        """Step 4: one release per group (one in all without ``mondrian``).

        ``rows_data`` is ``(outputs, targets)``: the model's probabilities and the encoded
        labels of every calibration row; ``sizes`` each group's number of rows. With
        private sizes, the sizes are released first and each group's release reads that
        many rows (:meth:`_private_size_curve`).
        """
        loss: SetLoss = run.score  # type: ignore[assignment]
        mechanism: RiskControlMechanism = run.mechanism  # type: ignore[assignment]
        outputs, targets = rows_data
        noise = check_noise_source(self.random_state)
        group_sizes, alpha = run.params["group_sizes"], run.params["alpha"]
        private = isinstance(group_sizes, PrivateGroupSizes)
        if private:
            sizes = group_sizes.release(sizes, codes.shape[0], noise)
        releases = []
        for code, size in enumerate(sizes.tolist()):
            rows = np.flatnonzero(codes == code)
            if not private:
                curve = loss.loss_curve(outputs[rows], targets[rows], thresholds)
            elif size > 0:
                curve = _private_size_curve(loss, rows_data, thresholds, rows, size, noise)
            else:
                releases.append(_empty_group_release(run, thresholds.shape[0]))
                continue
            release = mechanism._release(mechanism_params, curve, alpha, noise)
            releases.append(
                replace(release, privacy=release.privacy.under(run.params["adjacency"]))
            )
        return releases

    def _warn_about_releases(self, releases, bounds_record) -> None:
        """The warnings of every release, at the user's line."""
        for release in releases:
            warn_about_release(self, release)

    # ------------------------------------------------------------ planning
    def forecast(self, n_samples: int, *, mean_loss=None) -> RiskForecast:
        """A data-free forecast of the release on ``n_samples`` rows (no privacy spent).

        See :meth:`~privconf_sklearn.mechanisms.RiskControlMechanism.forecast`:
        ``mean_loss`` is the mean loss at each candidate, in ``thresholds_`` order
        (least conservative first), e.g. measured on public or non-sensitive data. By
        default, the loss's :meth:`~privconf_sklearn.scores.SetLoss.idealised_mean_loss`
        (for the FNR ``clip(t, 0, 1)^2``, a calibrated model with uniform
        probabilities), else the mechanism's default (linear in the candidate index).
        """
        params = self._validated_params()
        loss = self._resolve_score(params)
        thresholds = candidate_thresholds(params["thresholds"])
        if mean_loss is None:
            mean_loss = loss.idealised_mean_loss(thresholds)
        return params["mechanism"].forecast(
            n_samples,
            params["alpha"],
            thresholds.shape[0],
            loss_bound=loss.bound(),
            mean_loss=mean_loss,
        )

    @property
    def card_(self):
        """Risk card of this calibration, without a contract.

        A new :class:`~privconf_sklearn.cards.RiskCard` on each access: the loss, its
        bound ``B``, ``alpha``, the certified risk and the release of the calibration (or
        of every Mondrian group) and the calibration guarantee. Check a contract with
        ``RiskCard.from_estimator(est, RiskContract(...), epsilon_train=...)`` and a
        serialised card with :func:`~privconf_sklearn.cards.verify_card`.
        """
        return super().card_

    # ------------------------------------------------------------ predict
    _trivial_release = "the last, most conservative threshold of its grid"
    _forecast_call = "mechanism.forecast(n, alpha, n_candidates)"

    def predict_set(self, X, *, batch_size: int | None = None) -> np.ndarray:
        """Boolean sets ``{k : p_k(x) > threshold_}``, one column per label of ``classes_``.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Test features.
        batch_size : int, default=None
            Process rows in batches of this size.

        Returns
        -------
        ndarray of shape (n_samples, n_labels), dtype bool
        """
        return super().predict_set(X, batch_size=batch_size)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """The wrapped classifier's ``predict_proba``."""
        check_is_fitted(self, "calibration_")
        return self.estimator_.predict_proba(X)

    def mean_loss(self, X, y) -> float:
        """Mean loss of the sets :meth:`predict_set` gives on ``(X, y)``, under ``score_``.

        The loss the estimator calibrated (``loss``): for ``"fnr"`` the mean share of
        true labels missed, exactly; for a callable, the mean of its values; for another
        :class:`~privconf_sklearn.scores.SetLoss`, its
        :meth:`~privconf_sklearn.scores.SetLoss.mean_loss`. On held-out rows it estimates
        the risk ``E[L]`` that ``calibration_.risk_upper_bound`` bounds;
        :func:`~privconf_sklearn.metrics.neg_mean_loss_scorer` ranks a search by it.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
            Test features (at least one row).
        y : array-like of shape (n_samples, n_labels) or (n_samples,)
            True labels, in the form used for calibration: a 2-d indicator matrix
            (multilabel) or one label per row.

        Returns
        -------
        float

        Raises
        ------
        ValueError
            If ``X`` and ``y`` differ in length, ``y`` is empty or not of the calibration
            targets' form, or a callable loss leaves ``[0, loss_bound]``.
        """
        check_is_fitted(self, "calibration_")
        n = _check_same_length(X, y)
        if n == 0:
            raise ValueError("mean_loss needs at least one row; got 0.")
        loss = clone(self.score_)
        targets = loss.encode_targets(y, self.estimator_)
        if loss.multilabel_ != self.score_.multilabel_:
            kind = "a 2-d indicator" if self.score_.multilabel_ else "one label per row"
            raise ValueError(f"y must be {kind}, as the calibration targets were.")
        if targets.shape[1] != self.classes_.shape[0]:
            raise ValueError(
                f"y has {targets.shape[1]} label columns but the calibrated sets have "
                f"{self.classes_.shape[0]} (classes_)."
            )
        return loss.mean_loss(targets, self.predict_set(X))
