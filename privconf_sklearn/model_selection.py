"""Certificate-aware search over private conformal configurations.

After "Contract Cards for Auditable Private Conformal Prediction" (2026), Sec. 4 and
Table 2: :class:`CertificateAwareSearch` screens a grid formally (Eq. (3) on every
configuration's certificate and planned guarantee: public ``n``, ``alpha`` and mechanism
parameters, no data read), drops dominated configurations and calibrates only the others.
Its screening, dominance and evaluation-order rules are the ones
:func:`~privconf_sklearn.cards.verify_card` recomputes on the card it issues (their
statement is on the card, ``card_.selection.rule``).
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import _safe_indexing, check_random_state, indexable
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._ledger import reserve, resolve_ledger
from ._param_validation import Interval, StrOptions, validate_params
from .base import BasePrivateConformal, CalibrationScorer
from .cards import Candidate, CertificateSelection, Contract

__all__ = ["CertificateAwareSearch"]


def _check_evaluation_data(estimators, X_eval, y_eval) -> None:
    """Read ``(X_eval, y_eval)`` as the comparison will, before any privacy is spent.

    Lengths, labels or targets and the features each model must accept: a comparison
    that failed after the calibrations would have spent their budget for nothing.
    """
    n, n_y = _num_samples(X_eval), _num_samples(y_eval)
    if n != n_y or n == 0:
        raise ValueError(
            f"CertificateAwareSearch: X_eval has {n} rows and y_eval {n_y}; they must match "
            "and be non-empty (checked before any calibration spends privacy)."
        )
    for estimator in estimators:
        score = estimator.start_calibration().score  # the finalist ledger: nothing checked
        try:
            CalibrationScorer(estimator, score, estimator.estimator).encode_targets(y_eval)
            score.estimator_outputs(estimator.estimator, X_eval)
        except (TypeError, ValueError) as exc:
            message = f"CertificateAwareSearch: X_eval, y_eval cannot be compared on: {exc}"
            raise type(exc)(message) from exc


class _FinalistLedger:
    """The ledger a finalist calibrates on: the search records the composed spend instead.

    The composed spend of every finalist is reserved on the user's ledger, once, before
    any calibration row is read (a finalist spending on it directly would be charged
    the sum, also on disjoint rows).
    """

    def check(self, epsilon: float, delta: float) -> None:
        """Accept: the search reserved the composed spend on the user's ledger."""

    def spend(self, epsilon: float, delta: float) -> None:
        """Record nothing: the search reserved the composed spend."""


class CertificateAwareSearch(MetaEstimatorMixin, BaseEstimator):
    """Choose a configuration that meets a contract, spending privacy only on finalists.

    The contract-cards paper's Sec. 4 and Table 2: every configuration of ``param_grid`` is
    checked against Eq. (3) from its certificate and guarantee alone (under the estimator's
    ``adjacency``; no data read, no privacy spent), dominated ones are dropped
    (``selection.rule``), and only the others are calibrated and compared on ``X_eval``
    (without it, only the first in priority order is calibrated). On disjoint rows the
    search costs the largest ``epsilon_cal`` evaluated (parallel composition), on shared
    rows the sum, and it evaluates only what the contract's budget allows; the card's
    ``epsilon_cal`` clause is checked against this cost, and the estimator's ledger
    (``accountant``) is charged it once, atomically, before any calibration row is read
    (if a calibration then fails, the charge stays). An infeasible contract gives an
    infeasibility card (best attempted configuration, negative margins), not an error.

    Parameters
    ----------
    estimator : PrivateConformalClassifier or PrivateConformalRegressor
        Template with ``prefit=True`` (fixed model, the paper's Theorem 5.1), no ``mondrian``.
    contract : Contract
        The requirements.
    param_grid : dict or list of dict
        :class:`~sklearn.model_selection.ParameterGrid` plus ``"calibration_size"``: row counts.
    epsilon_train, delta_train : float or None, default=None
        Training privacy (None: as :meth:`ContractCard.from_estimator` reads it).
    calibration_split : {"disjoint", "shared"}, default="disjoint"
        Whether evaluated configurations calibrate on disjoint rows or the same rows.
    random_state : None, int or RandomState, default=None
        Seeds which rows calibrate which configuration (not the privacy noise).

    Attributes
    ----------
    candidates_ : tuple of Candidate
        Every grid configuration with its certificate and status.
    best_index_ : int or None
        Grid index of the chosen configuration (None if the contract is infeasible).
    best_estimator_ : estimator or None
        The chosen, calibrated estimator (None if infeasible).
    card_ : ContractCard
        The chosen configuration's card (or the infeasibility card), with the selection.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from privconf_sklearn import PrivateConformalClassifier
    >>> from privconf_sklearn.cards import Contract
    >>> from privconf_sklearn.model_selection import CertificateAwareSearch
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(9000, 2)); y = (X[:, 0] + rng.normal(size=9000) > 0).astype(int)
    >>> model = LogisticRegression().fit(X[:3000], y[:3000])
    >>> search = CertificateAwareSearch(
    ...     PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), random_state=0),
    ...     contract=Contract(0.85, max_epsilon_train=float("inf"), max_epsilon_cal=1.0, beta=0),
    ...     param_grid={"alpha": [0.1, 0.2], "mechanism__epsilon": [0.5, 1.0, 2.0],
    ...                 "calibration_size": [1000, 2000]},
    ...     random_state=0,
    ... ).fit(X[3000:6000], y[3000:6000], X_eval=X[6000:], y_eval=y[6000:])
    >>> s = search.card_.selection
    >>> s.n_checked, s.n_formally_feasible, s.n_selected, s.n_evaluated, search.card_.decision
    (12, 4, 2, 2, 'feasible')
    """

    _parameter_constraints: dict = {
        "estimator": [BasePrivateConformal],
        "contract": [Contract],
        "param_grid": [dict, list],
        # The stated training budget goes to the cards, which state its constraints.
        "epsilon_train": CertificateSelection.training_constraints["epsilon_train"],
        "delta_train": CertificateSelection.training_constraints["delta_train"],
        "calibration_split": [StrOptions({"disjoint", "shared"})],
        "random_state": [
            None,
            Interval(Integral, 0, 2**32 - 1, closed="both"),
            np.random.RandomState,
        ],
    }

    def __init__(
        self,
        estimator,
        *,
        contract,
        param_grid,
        epsilon_train=None,
        delta_train=None,
        calibration_split="disjoint",
        random_state=None,
    ):
        self.estimator = estimator
        self.contract = contract
        self.param_grid = param_grid
        self.epsilon_train = epsilon_train
        self.delta_train = delta_train
        self.calibration_split = calibration_split
        self.random_state = random_state

    def _check_params(self) -> CertificateSelection:
        """Validate the search's parameters (no data read); the selection's rules."""
        validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )
        rules = CertificateSelection(
            self.contract,
            self.calibration_split,
            self.epsilon_train,
            self.delta_train,
            owner=type(self).__name__,
        )
        if not self.estimator.prefit:
            raise ValueError(
                "CertificateAwareSearch: estimator must have prefit=True: the search "
                "compares calibrations of one fixed model (fit the model first; its "
                "training privacy is eps_train)."
            )
        name = "param_grid['calibration_size']"
        for grid in self.param_grid if isinstance(self.param_grid, list) else [self.param_grid]:
            if not isinstance(grid, dict) or "calibration_size" not in grid:
                raise ValueError(
                    "CertificateAwareSearch: param_grid must be a dict (or list of dicts) "
                    "with a 'calibration_size' entry: the certificates depend on the "
                    "calibration size n."
                )
            if "accountant" in grid:
                raise ValueError(
                    "CertificateAwareSearch: param_grid must not set 'accountant': the "
                    "search charges the composed spend of its calibrations to the "
                    "estimator's one ledger."
                )
            rules.check_sizes(name, grid["calibration_size"])
            if not grid["calibration_size"]:
                raise ValueError(f"CertificateAwareSearch: {name} must not be empty.")
        if not self.param_grid:
            raise ValueError(
                "CertificateAwareSearch: param_grid holds no configuration (an empty list)."
            )
        return rules

    def _candidate(
        self, rules: CertificateSelection, index: int, params: dict
    ) -> tuple[BasePrivateConformal, Candidate]:
        """One grid configuration with its certificate, planned guarantee and Eq. (3).

        The configured estimator calibrates, if it is a finalist, on a ledger that
        records nothing: the search charges the composed spend of its finalists to the
        user's ledger once (:meth:`_reserve_budget`).
        """
        n_samples = int(params.pop("calibration_size"))
        # Clone grid values (a mechanism instance is mutated by mechanism__* params),
        # except a prefit model, which cloning would unfit.
        params = {k: v if k == "estimator" else clone(v, safe=False) for k, v in params.items()}
        estimator = clone(self.estimator).set_params(**params, accountant=_FinalistLedger())
        run = estimator.start_calibration()  # parameters validated; the ledger checks nothing
        if run.mechanism.requires_groups or run.params["mondrian"] is not None:
            raise ValueError(
                "The search takes neither federated mechanisms nor Mondrian calibration: "
                "their certificates depend on how the rows fall into agents or groups, "
                "which a search over calibration sizes does not fix. Check such "
                "configurations one by one (ContractCard.for_configuration(..., "
                "agent_sizes=...), or the estimator's card_)."
            )
        candidate = rules.candidate(
            index,
            estimator,
            n_samples,
            mechanism=run.mechanism,
            score=run.score,
            alpha=run.params["alpha"],
            adjacency=run.params["adjacency"],
        )
        return estimator, candidate

    def _screen(self) -> tuple[CertificateSelection, list[tuple[BasePrivateConformal, Candidate]]]:
        """Every grid configuration with its formal status; reads no data."""
        rules = self._check_params()
        grid = enumerate(ParameterGrid(self.param_grid))
        configured = [self._candidate(rules, index, dict(params)) for index, params in grid]
        candidates = rules.screen([candidate for _, candidate in configured])
        estimators = [estimator for estimator, _ in configured]
        return rules, list(zip(estimators, candidates, strict=True))

    def screen(self) -> tuple[Candidate, ...]:
        """Formal screening only: every configuration's certificate and status.

        Reads no data, spends no privacy; kept configurations have status ``"skipped"``.
        """
        return tuple(candidate for _, candidate in self._screen()[1])

    def _plan(
        self, rules: CertificateSelection, kept: list[Candidate], n_rows: int, has_eval: bool
    ):
        """Which kept candidates to calibrate, on which rows (positions in a permutation)."""
        plan: list[tuple[Candidate, np.ndarray]] = []
        notes: dict[int, str] = {}
        shared, used = self.calibration_split == "shared", 0
        for candidate in rules.evaluation_order(kept):
            n = candidate.configuration.n_samples
            spend = rules.shared_spend([*(c for c, _ in plan), candidate])
            over_budget = spend[0] > self.contract.max_epsilon_cal or spend[1] > self.contract.delta
            if n > (n_rows if shared else n_rows - used):
                left = f"{n_rows} given" if shared else f"{n_rows - used} left"
                notes[candidate.index] = f"needs {n} calibration rows, {left}"
            elif shared and over_budget:
                notes[candidate.index] = "would exceed the calibration budget (shared rows)"
            elif not plan or has_eval:
                start = 0 if shared else used
                plan.append((candidate, np.arange(start, start + n)))
                used += n
            else:
                notes[candidate.index] = "not calibrated: no evaluation data to compare it on"
        return plan, notes

    def _reserve_budget(self, rules: CertificateSelection, finalists: list[Candidate]) -> None:
        """Charge the finalists' composed spend to the user's ledger, before any data is read.

        Finalists are formally feasible (their level is reachable at their size), so
        each release reads its rows and records its planned guarantee, which every
        finalist checks against its own reservation
        (:meth:`~privconf_sklearn.base.CalibrationRun.reserve`): the charge is exactly the
        composed spend of the releases. It is final, also if a calibration fails (see
        :func:`~privconf_sklearn._ledger.reserve`).
        """
        ledger = resolve_ledger(self.estimator.accountant)
        reserve(ledger, *rules.reservation(finalists))

    def fit(self, X, y, *, X_eval=None, y_eval=None):
        """Screen formally, then calibrate and compare only the kept configurations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Calibration features (the private rows).
        y : array-like of shape (n_samples,)
            Calibration targets.
        X_eval, y_eval : array-like, default=None
            Comparison data, used without privacy protection (public or released only).

        Returns
        -------
        self : object
        """
        if (X_eval is None) != (y_eval is None):
            raise ValueError("CertificateAwareSearch: X_eval and y_eval must be given together.")
        rules, screened = self._screen()
        candidates = [c for _, c in screened]
        kept = [c for c in candidates if c.status == "skipped"]
        if not kept:
            self.card_ = rules.infeasibility_card(candidates)
            self.candidates_, self.best_index_ = tuple(candidates), None
            self.best_estimator_ = None
            return self
        X, y = indexable(X, y)
        n_rows = _num_samples(X)
        plan, notes = self._plan(rules, kept, n_rows, X_eval is not None)
        if not plan:
            smallest = min(c.configuration.n_samples for c in kept)
            raise ValueError(
                f"Not enough calibration rows: the smallest admissible configuration needs "
                f"{smallest} rows, {n_rows} were given."
            )
        if X_eval is not None:
            _check_evaluation_data([screened[c.index][0] for c, _ in plan], X_eval, y_eval)
        self._reserve_budget(rules, [c for c, _ in plan])
        fitted = self._calibrate_finalists(screened, plan, X, y)
        chosen, self.card_, selection = rules.choose(candidates, notes, fitted, X_eval, y_eval)
        self.candidates_, self.best_index_ = selection.candidates, chosen
        self.best_estimator_ = fitted[chosen]
        return self

    def _calibrate_finalists(self, screened, plan, X, y) -> dict[int, BasePrivateConformal]:
        """Each finalist calibrated on its rows (the budget is already reserved)."""
        permutation = check_random_state(self.random_state).permutation(_num_samples(X))
        fitted: dict[int, BasePrivateConformal] = {}
        for candidate, positions in plan:
            i, rows = candidate.index, permutation[positions]
            finalist = screened[i][0]  # calibrates on a _FinalistLedger (see _candidate)
            fitted[i] = finalist.fit_calibrate(
                _safe_indexing(X, rows), _safe_indexing(y, rows)
            ).set_params(accountant=self.estimator.accountant)
        return fitted

    def _fitted(self):
        check_is_fitted(self, "card_")
        if self.best_estimator_ is None:
            raise ValueError(
                "No configuration of the grid meets the contract; see card_ for the failed "
                "clauses and margins."
            )
        return self.best_estimator_

    def predict_set(self, X, **kwargs):
        """Prediction sets (intervals) of the chosen configuration."""
        return self._fitted().predict_set(X, **kwargs)

    def predict(self, X):
        """Point predictions of the wrapped model."""
        return self._fitted().predict(X)
