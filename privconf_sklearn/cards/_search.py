"""The card side of a certificate-aware search (the contract-cards paper, Sec. 4, Table 2).

:class:`CertificateSelection` builds the records
:class:`~privconf_sklearn.model_selection.CertificateAwareSearch` puts on its card and
applies the selection rules of :mod:`._selection` to them, the rules
:func:`~privconf_sklearn.cards.verify_card` recomputes. The search itself (the grid,
the clones, the calibration rows, the ledger) stays in
:mod:`privconf_sklearn.model_selection`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .._param_validation import validate_params
from ._card import ContractCard, configuration_of, empirical_diagnostics, split_details
from ._contract import Contract
from ._records import EMPIRICAL, SIZE, Candidate, Certificate, Diagnostics, Items, Selection
from ._selection import (
    best_attempted,
    candidate_entry,
    clauses_of,
    compose,
    composed_spend,
    evaluation_priority,
    formal_statuses,
    selection_of,
)
from ._training import STATED_BUDGET, check_stated, training_privacy

__all__ = ["CertificateSelection"]


class CertificateSelection:
    """The records and rules of a certificate-aware search, for one contract.

    The contract-cards paper's Sec. 4 and Table 2, as
    :class:`~privconf_sklearn.model_selection.CertificateAwareSearch` applies them and
    :func:`~privconf_sklearn.cards.verify_card` recomputes them: every configuration is
    a :class:`Candidate` checked against Eq. (3) from public quantities alone
    (:meth:`candidate`); dominated ones are dropped (:meth:`screen`, the rule in
    ``Selection.rule``); the kept ones are calibrated in :meth:`evaluation_order`; the
    evaluated one with the smallest mean set size (width) is chosen (:meth:`choose`),
    or an infeasibility card is issued (:meth:`infeasibility_card`).

    Parameters
    ----------
    contract : Contract
        The requirements.
    calibration_split : {"disjoint", "shared"}, default="disjoint"
        Whether evaluated configurations calibrate on disjoint rows (their spends
        compose in parallel: the maximum) or on the same rows (the sum).
    epsilon_train, delta_train : float or None, default=None
        Stated training privacy (None: as :func:`ContractCard.from_estimator
        <privconf_sklearn.cards.ContractCard.from_estimator>` reads it).
    owner : str, default="CertificateSelection"
        Name used in error messages.

    Raises
    ------
    TypeError, ValueError
        For a bad stated training budget, naming it.
    """

    #: The constraints of ``epsilon_train`` and ``delta_train`` (a search that passes
    #: them on validates them with these).
    training_constraints = STATED_BUDGET

    def __init__(
        self,
        contract: Contract,
        calibration_split: str = "disjoint",
        epsilon_train=None,
        delta_train=None,
        *,
        owner: str = "CertificateSelection",
    ):
        check_stated(epsilon_train, delta_train, owner)
        self.contract = contract
        self.calibration_split = calibration_split
        self.epsilon_train, self.delta_train = epsilon_train, delta_train
        self.owner = owner

    def check_sizes(self, name: str, sizes) -> tuple[int, ...]:
        """A grid's calibration sizes: a sequence of integers in [1, 2**53].

        Raises
        ------
        TypeError, ValueError
            Naming ``name``.
        """
        return validate_params({name: [Items(*SIZE)]}, {name: sizes}, self.owner)[name]

    def candidate(
        self, index: int, estimator, n_samples: int, *, mechanism, score, alpha, adjacency
    ) -> Candidate:
        """One configuration with its certificate, planned guarantee and Eq. (3).

        From public quantities only (no data read, no privacy spent). Its status is
        ``"infeasible"`` (with the failed clauses in ``note``) or ``"skipped"``.

        Parameters
        ----------
        index : int
            Position in the grid.
        estimator : PrivateConformalClassifier or PrivateConformalRegressor
            The configured (unfitted) estimator; its model is read for the training
            privacy and the configuration.
        n_samples : int
            Calibration size.
        mechanism : QuantileMechanism
            The resolved mechanism.
        score : BaseConformityScore
            The resolved conformity score.
        alpha : float
            Miscoverage level.
        adjacency : {"replace-one", "add/remove"}
            The relation the calibration guarantee is stated under.

        Returns
        -------
        Candidate
        """
        cert = mechanism.coverage_certificate(n_samples, alpha)
        certificate = Certificate.of(cert.lower_bound, cert.confidence, cert.feasible, cert.reason)
        model = estimator.estimator
        training = training_privacy(model, self.epsilon_train, self.delta_train)
        privacy = mechanism.privacy_guarantee().under(adjacency)
        config = configuration_of(estimator, n_samples, alpha, mechanism, score, model)
        candidate = Candidate(index, config, training, privacy, certificate, True, "skipped", "")
        failed = ", ".join(c.name for c in clauses_of(self.contract, candidate) if not c.satisfied)
        status, note = ("infeasible", f"fails {failed}") if failed else ("skipped", "")
        return replace(candidate, formally_feasible=not failed, status=status, note=note)

    def screen(self, candidates) -> list[Candidate]:
        """The candidates with the dominance rule applied (reads no data).

        Kept configurations stay ``"skipped"`` with the note ``"admissible, not
        calibrated"``; dominated ones become ``"dominated"`` (``note`` names by which).
        """
        statuses = formal_statuses(candidates)
        screened = []
        for candidate in candidates:
            status = statuses[candidate.index]  # None: kept
            if status is None:
                candidate = replace(candidate, note="admissible, not calibrated")
            elif status != "infeasible":
                candidate = replace(candidate, status="dominated", note=status)
            screened.append(candidate)
        return screened

    @staticmethod
    def evaluation_order(candidates) -> list[Candidate]:
        """The kept candidates in the order they are calibrated and evaluated.

        Nominal coverage up, then ``epsilon_cal`` and calibration size down, then grid
        order (the order ``Selection.rule`` states).
        """
        return sorted(candidates, key=evaluation_priority)

    def shared_spend(self, candidates) -> tuple[float, float]:
        """The calibration ``(epsilon, delta)`` of ``candidates`` calibrated on the same rows."""
        return composed_spend([c.calibration for c in candidates], "shared")

    def reservation(self, candidates) -> tuple[float, float]:
        """What the ledger is charged for calibrating ``candidates``, once, beforehand.

        Each formally feasible candidate's release records its planned guarantee, so the
        charge is the composition, under ``calibration_split``, of their ledger spends.
        """
        spends = [c.calibration.accountant_spend() for c in candidates]
        return compose(spends, self.calibration_split)

    @staticmethod
    def evaluate(fitted: dict, X_eval, y_eval) -> tuple[dict, dict, dict]:
        """Every calibrated candidate's diagnostics, owner diagnostics and mean size.

        ``fitted`` maps grid indices to calibrated estimators. ``(X_eval, y_eval)`` is
        public or already released (the search documents it), so the empirical
        diagnostics are public; without it, only the published details are recorded and
        every mean size is infinite.
        """
        diagnostics, owner, sizes = {}, {}, {}
        for i, estimator in fitted.items():
            public, owner[str(i)] = split_details(estimator.calibration_)
            evaluation = {} if X_eval is None else empirical_diagnostics(estimator, X_eval, y_eval)
            diagnostics[i] = Diagnostics(**evaluation, mechanism_details=public, candidate_index=i)
            sizes[i] = evaluation.get("mean_width", evaluation.get("mean_set_size", np.inf))
        return diagnostics, owner, sizes

    def choose(
        self, candidates, notes: dict, fitted: dict, X_eval, y_eval
    ) -> tuple[int, ContractCard, Selection]:
        """The chosen candidate's index, its card and the selection summary.

        The evaluated candidate with the smallest mean set size (width) on the
        evaluation data, ties and no evaluation data going to the first in evaluation
        order (``fitted``'s order). Evaluated candidates carry the guarantee their
        calibration actually has (e.g. marked as not holding when the regressor took
        score bounds from the data); the others get their ``notes``.
        """
        diagnostics, owner, sizes = self.evaluate(fitted, X_eval, y_eval)
        chosen = min(fitted, key=sizes.__getitem__)  # ties: the first in priority order
        recorded = [
            replace(
                c,
                status="chosen" if c.index == chosen else "evaluated",
                note="",
                calibration=fitted[c.index].calibration_.privacy,
            )
            if c.index in fitted
            else replace(c, note=notes.get(c.index, c.note))
            for c in candidates
        ]
        selection = selection_of(self.contract, recorded, self.calibration_split)
        card = ContractCard.from_estimator(
            fitted[chosen],
            self.contract,
            epsilon_train=self.epsilon_train,
            delta_train=self.delta_train,
            selection=selection,
        )
        for name in EMPIRICAL:
            setattr(card.diagnostics, name, getattr(diagnostics[chosen], name))
        card.diagnostics.candidates = tuple(diagnostics.values())
        if any(owner.values()):
            card.owner_diagnostics["candidates"] = {k: v for k, v in owner.items() if v}
        return chosen, card, selection

    def infeasibility_card(self, candidates) -> ContractCard:
        """The card when no configuration is kept: the best attempted one, its margins.

        Nothing is read or spent.
        """
        best = best_attempted(self.contract, candidates)
        return ContractCard.build(
            contract=self.contract,
            configuration=best.configuration,
            training_privacy=best.training,
            calibration_privacy=best.calibration,
            calibrations=[candidate_entry(best)],
            selection=selection_of(self.contract, candidates, self.calibration_split),
        )
