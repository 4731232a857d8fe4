"""Certificate-aware search over private conformal configurations (the paper's Sec. 4).

Formal screening reads no data (certificates depend only on the public ``n``,
``alpha`` and the mechanism's parameters); only the few kept configurations are
calibrated: on disjoint rows they compose in parallel, on shared rows sequentially.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.model_selection import ParameterGrid
from sklearn.utils import _safe_indexing, check_random_state, indexable
from sklearn.utils.validation import _num_samples, check_is_fitted

from .._base import BasePrivateConformal
from .._validation import InstanceOf, Interval, Options, validate_params
from ._card import (
    ContractCard,
    configuration_of,
    empirical_diagnostics,
    planned_privacy,
    split_details,
)
from ._contract import Contract, check_contract
from ._records import SIZE, Candidate, Certificate, Diagnostics, Selection, tuple_of
from ._selection import (
    DOMINANCE_RULE,
    best_attempted,
    composed_spend,
    coverage_margin,
    non_dominated,
    priority_order,
)
from ._training import check_stated, training_privacy

__all__ = ["CertificateAwareSearch"]

_SIZES = tuple_of(*SIZE)
_ALPHA = {"alpha": [Interval("real", 0, 1, closed="neither")]}


class CertificateAwareSearch(MetaEstimatorMixin, BaseEstimator):
    """Choose a configuration that meets a contract, spending privacy only on finalists.

    The contract-cards paper's Sec. 4 and Table 2. Every configuration of
    ``param_grid`` is first checked against Eq. (3) with its mechanism's certificate
    and guarantee (no data read, no privacy spent); dominated feasible configurations
    are dropped (rule in ``selection.rule``); only the remaining ones are calibrated on
    the rows given to :meth:`fit` and compared on evaluation data. An infeasible
    contract gives an infeasibility card (best attempted configuration, negative
    margins), not an exception.

    Privacy cost: with ``calibration_split="disjoint"`` the evaluated configurations
    calibrate on disjoint rows, so the search costs the largest ``epsilon_cal`` among
    them (parallel composition); with ``"shared"`` the costs add up and the search
    evaluates only what the contract's budget allows. The card's ``epsilon_cal``
    clause is checked against this composed cost. ``X_eval`` is used without privacy
    protection: it must be public or already released. Without it only the first
    configuration in priority order is calibrated. The user guide compares the cost
    with ``GridSearchCV``'s.

    Parameters
    ----------
    estimator : PrivateConformalClassifier or PrivateConformalRegressor
        Template with ``prefit=True`` (the model is fixed before calibration, as the
        paper's Theorem 5.1 assumes); grid parameters are set on clones of it.
    contract : Contract
        The requirements.
    param_grid : dict or list of dict
        As for :class:`~sklearn.model_selection.ParameterGrid`, over the estimator's
        parameters (``alpha``, ``mechanism``, ``mechanism__epsilon``,
        ``mechanism__n_bins``, ``conformity_score``, ``estimator``...) plus the
        required key ``"calibration_size"``: list of calibration sizes (int rows).
    epsilon_train, delta_train : float or None, default=None
        Training privacy (None: read from diffprivlib models; see
        :meth:`ContractCard.from_estimator`).
    calibration_split : {"disjoint", "shared"}, default="disjoint"
        Whether evaluated configurations use disjoint calibration rows (parallel
        composition, needs the sum of their sizes) or the same rows (sequential
        composition).
    random_state : None, int or RandomState, default=None
        Seeds the assignment of calibration rows to configurations (not privacy
        noise, which the estimator's own ``random_state`` governs).

    Attributes
    ----------
    candidates_ : tuple of Candidate
        Every grid configuration with its certificate and status.
    best_index_ : int or None
        Grid index of the chosen configuration (None if the contract is infeasible).
    best_estimator_ : estimator or None
        The chosen, calibrated estimator (None if infeasible).
    card_ : ContractCard
        Card of the chosen configuration (or the infeasibility card), with the
        selection summary and the evaluated configurations' diagnostics.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> from privconf_sklearn import PrivateConformalClassifier
    >>> from privconf_sklearn.cards import CertificateAwareSearch, Contract
    >>> from privconf_sklearn.mechanisms import ExponQ
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(9000, 2)); y = (X[:, 0] + rng.normal(size=9000) > 0).astype(int)
    >>> model = LogisticRegression().fit(X[:3000], y[:3000])
    >>> search = CertificateAwareSearch(
    ...     PrivateConformalClassifier(model, mechanism=ExponQ(epsilon=1.0), random_state=0),
    ...     contract=Contract(0.85, max_epsilon_train=float("inf"), max_epsilon_cal=1.0,
    ...                       beta=0.0),
    ...     param_grid={"alpha": [0.1, 0.2], "mechanism__epsilon": [0.5, 1.0, 2.0],
    ...                 "calibration_size": [1000, 2000]},
    ...     random_state=0,
    ... ).fit(X[3000:6000], y[3000:6000], X_eval=X[6000:], y_eval=y[6000:])
    >>> s = search.card_.selection
    >>> s.n_checked, s.n_formally_feasible, s.n_selected, s.n_evaluated
    (12, 4, 2, 2)
    >>> search.card_.decision
    'feasible'
    """

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

    # ------------------------------------------------------------- screening
    _parameter_constraints: dict = {
        "estimator": [InstanceOf(BasePrivateConformal, "private conformal estimator")],
        "contract": [InstanceOf(Contract)],
        "param_grid": [InstanceOf(dict | list, "dict or list of dicts")],
        "calibration_split": [Options("disjoint", "shared")],
    }

    def _check_params(self) -> None:
        validate_params(self, self._parameter_constraints)
        check_stated(self.epsilon_train, self.delta_train)
        if not self.estimator.prefit:
            raise ValueError(
                "estimator must have prefit=True: the search compares calibrations of one "
                "fixed model (fit the model first; its training privacy is eps_train)."
            )
        grids = self.param_grid if isinstance(self.param_grid, list) else [self.param_grid]
        for grid in grids:
            if not isinstance(grid, dict) or "calibration_size" not in grid:
                raise ValueError(
                    "param_grid must be a dict (or list of dicts) with a 'calibration_size' "
                    "entry: the certificates depend on the calibration size n."
                )
            validate_params(
                "CertificateAwareSearch",
                {"param_grid['calibration_size']": [_SIZES]},
                {"param_grid['calibration_size']": grid["calibration_size"]},
            )
            if not grid["calibration_size"]:
                raise ValueError("param_grid['calibration_size'] must not be empty.")

    def _screen(self) -> list[tuple[BasePrivateConformal, Candidate]]:
        """Every grid configuration with its formal status; reads no data."""
        self._check_params()
        candidates = []
        for index, params in enumerate(ParameterGrid(self.param_grid)):
            params = dict(params)
            n_samples = int(params.pop("calibration_size"))
            # Clone grid values (a mechanism instance is mutated by mechanism__* params),
            # except a prefit model, which cloning would unfit.
            params = {k: v if k == "estimator" else clone(v, safe=False) for k, v in params.items()}
            estimator = clone(self.estimator).set_params(**params)
            alpha = validate_params(estimator, _ALPHA)["alpha"]
            mechanism = estimator._resolve_mechanism()
            if mechanism.requires_groups:
                raise ValueError(
                    f"{type(mechanism).__name__} is federated: its certificate depends on "
                    "how the rows are spread over agents, which a search over calibration "
                    "sizes does not fix. Check federated configurations one by one with "
                    "ContractCard.for_configuration(..., agent_sizes=...)."
                )
            planned = mechanism.coverage_certificate(n_samples, alpha)
            certificate = Certificate.of(
                planned.lower_bound, planned.confidence, planned.feasible, planned.reason
            )
            training = training_privacy(estimator.estimator, self.epsilon_train, self.delta_train)
            privacy = planned_privacy(mechanism, estimator.get_params().get("adjacency"))
            clauses = check_contract(self.contract, training, privacy, certificate)
            feasible = all(clause.satisfied for clause in clauses)
            failed = ", ".join(c.name for c in clauses if not c.satisfied)
            candidate = Candidate(
                index=index,
                configuration=configuration_of(
                    estimator, n_samples, mechanism, estimator._resolve_score(), estimator.estimator
                ),
                training=training,
                calibration=privacy,
                certificate=certificate,
                formally_feasible=feasible,
                status="skipped" if feasible else "infeasible",
                note="" if feasible else f"fails {failed}",
            )
            candidates.append((estimator, candidate))
        kept = non_dominated([c for _, c in candidates])
        for position, (estimator, candidate) in enumerate(candidates):
            winner = kept.get(candidate.index)
            if candidate.formally_feasible and winner is not None:
                candidates[position] = (
                    estimator,
                    replace(candidate, status="dominated", note=f"dominated by #{winner}"),
                )
            elif candidate.formally_feasible:
                candidates[position] = (
                    estimator,
                    replace(candidate, note="admissible, not calibrated"),
                )
        return candidates

    def screen(self) -> tuple[Candidate, ...]:
        """Formal screening only: every configuration's certificate and status.

        Reads no data and spends no privacy. Feasible, non-dominated configurations
        have status ``"skipped"`` (not calibrated yet).
        """
        return tuple(candidate for _, candidate in self._screen())

    # ------------------------------------------------------------------- fit
    def _plan(self, kept: list[Candidate], n_rows: int, has_eval: bool):
        """Which kept candidates to calibrate, on which rows (positions in a permutation)."""
        plan: list[tuple[Candidate, np.ndarray]] = []
        notes: dict[int, str] = {}
        used = 0
        for candidate in priority_order(kept):
            n = candidate.configuration.n_samples
            if self.calibration_split == "disjoint":
                if n > n_rows - used:
                    notes[candidate.index] = f"needs {n} calibration rows, {n_rows - used} left"
                    continue
                rows, used = np.arange(used, used + n), used + n
            else:
                spend = composed_spend(
                    [c.calibration for c, _ in plan] + [candidate.calibration], "shared"
                )
                if n > n_rows:
                    notes[candidate.index] = f"needs {n} calibration rows, {n_rows} given"
                    continue
                if spend[0] > self.contract.max_epsilon_cal or spend[1] > self.contract.delta:
                    notes[candidate.index] = "would exceed the calibration budget (shared rows)"
                    continue
                rows = np.arange(n)
            plan.append((candidate, rows))
            if not has_eval:
                break
        for candidate in kept:
            if candidate.index not in notes and all(c.index != candidate.index for c, _ in plan):
                notes[candidate.index] = "not calibrated: no evaluation data to compare it on"
        return plan, notes

    def fit(self, X, y, *, X_eval=None, y_eval=None):
        """Screen formally, then calibrate and compare only the kept configurations.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Calibration features (the private rows).
        y : array-like of shape (n_samples,)
            Calibration targets.
        X_eval, y_eval : array-like, default=None
            Evaluation data the calibrated configurations are compared on; used
            without privacy protection (public or already released data only).

        Returns
        -------
        self : object
        """
        if (X_eval is None) != (y_eval is None):
            raise ValueError("X_eval and y_eval must be given together.")
        screened = self._screen()
        candidates = [c for _, c in screened]
        kept = [c for c in candidates if c.formally_feasible and c.status != "dominated"]
        margin = max(coverage_margin(self.contract, c) for c in candidates)
        if not kept:
            best = best_attempted(self.contract, candidates)
            selection = self._selection(candidates, None, 0, margin, (0.0, 0.0))
            card = ContractCard.build(
                contract=self.contract,
                configuration=best.configuration,
                training_privacy=best.training,
                calibration_privacy=best.calibration,
                certificate=best.certificate,
                selection=selection,
            )
            self.candidates_, self.best_index_, self.best_estimator_, self.card_ = (
                selection.candidates,
                None,
                None,
                card,
            )
            return self
        X, y = indexable(X, y)
        n_rows = _num_samples(X)
        plan, notes = self._plan(kept, n_rows, X_eval is not None)
        if not plan:
            smallest = min(c.configuration.n_samples for c in kept)
            raise ValueError(
                f"Not enough calibration rows: the smallest admissible configuration needs "
                f"{smallest} rows, {n_rows} were given."
            )
        permutation = check_random_state(self.random_state).permutation(n_rows)
        estimators = {c.index: e for e, c in screened}
        fitted, diagnostics, owner = {}, {}, {}
        for candidate, positions in plan:
            rows = permutation[positions]
            estimator = estimators[candidate.index].fit_calibrate(
                _safe_indexing(X, rows), _safe_indexing(y, rows)
            )
            public, owner[str(candidate.index)] = split_details(estimator.calibration_)
            # X_eval is public or already released (documented), so these are public.
            evaluation = {} if X_eval is None else empirical_diagnostics(estimator, X_eval, y_eval)
            diagnostics[candidate.index] = Diagnostics(
                **evaluation, mechanism_details=public, candidate_index=candidate.index
            )
            fitted[candidate.index] = estimator
        chosen = self._choose([c for c, _ in plan], diagnostics)
        statuses = {c.index: "evaluated" for c, _ in plan} | {chosen: "chosen"}
        # Evaluated configurations carry the guarantee their calibration actually has
        # (e.g. marked as not holding when the regressor took score bounds from data).
        recorded = [
            replace(
                c,
                status=statuses[c.index],
                note="",
                calibration=fitted[c.index].calibration_.privacy,
            )
            if c.index in statuses
            else replace(c, note=notes.get(c.index, c.note))
            for c in candidates
        ]
        spent = composed_spend(
            [fitted[c.index].calibration_.privacy for c, _ in plan], self.calibration_split
        )
        selection = self._selection(recorded, chosen, len(plan), margin, spent)
        best = fitted[chosen]
        card = ContractCard.from_estimator(
            best,
            self.contract,
            epsilon_train=self.epsilon_train,
            delta_train=self.delta_train,
            selection=selection,
        )
        card.diagnostics.candidates = tuple(diagnostics[c.index] for c, _ in plan)
        for name in ("n_test", "empirical_coverage", "mean_set_size", "singleton_rate"):
            setattr(card.diagnostics, name, getattr(diagnostics[chosen], name))
        for name in ("accuracy", "mean_width"):
            setattr(card.diagnostics, name, getattr(diagnostics[chosen], name))
        if any(owner.values()):
            card.owner_diagnostics["candidates"] = {k: v for k, v in owner.items() if v}
        self.candidates_, self.best_index_, self.best_estimator_, self.card_ = (
            selection.candidates,
            chosen,
            best,
            card,
        )
        return self

    def _choose(self, evaluated: list[Candidate], diagnostics: dict) -> int:
        """Smallest mean set size (width), ties and no evaluation data by priority."""

        def size(candidate: Candidate):
            found = diagnostics[candidate.index]
            value = found.mean_width if found.mean_width is not None else found.mean_set_size
            return np.inf if value is None else value

        return min(evaluated, key=lambda c: (size(c), evaluated.index(c))).index

    def _selection(self, candidates, chosen, n_evaluated, margin, spent) -> Selection:
        statuses = [c.status for c in candidates]
        return Selection(
            rule=DOMINANCE_RULE,
            calibration_split=self.calibration_split,
            n_checked=len(candidates),
            n_formally_feasible=sum(c.formally_feasible for c in candidates),
            n_selected=sum(s in ("skipped", "evaluated", "chosen") for s in statuses),
            n_evaluated=n_evaluated,
            chosen_index=chosen,
            best_coverage_margin=margin,
            spent_epsilon_cal=float(spent[0]),
            spent_delta_cal=float(spent[1]),
            candidates=tuple(candidates),
        )

    # --------------------------------------------------------------- predict
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
