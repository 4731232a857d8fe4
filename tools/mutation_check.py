"""A small mutation check: do the tests catch plausible bugs in privacy and coverage code.

Each mutant replaces one exact piece of source text by a plausible mistake (a dropped
factor, an off-by-one rank, a flipped sign). For every mutant the script copies the
repository (without ``.git``, virtual environments and build output) into a temporary
directory once, applies the mutant there, runs the targeted tests with the current
interpreter against the copy, and restores the file. A mutant is

- **killed** when the targeted tests fail (what we want),
- **survived** when they pass (a test is missing or too weak),
- **stale** when its original text no longer occurs exactly once (the code moved on:
  update the mutant), or **timeout** when the tests ran longer than ``--timeout``.

Usage (from the repository root, with the ``[dev]`` extra installed)::

    python tools/mutation_check.py                 # every mutant
    python tools/mutation_check.py --list          # the mutants, not run
    python tools/mutation_check.py --only expon-q-non-strict-counts dp-aps-laplace-scale

It exits with 0 when it ran, whatever survived (``--strict``: 1 if any mutant survived
or is stale), so that it can report on code where some mutants are known survivors. The
developer documentation (``docs/developer/mutation_check.rst``) lists the mutants and
how to add one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Not copied: version control, environments, caches and build output.
IGNORED = shutil.ignore_patterns(
    ".git", ".venv*", "__pycache__", ".pytest_cache", ".ruff_cache", ".mypy_cache",
    ".hypothesis", "_build", "build", "dist", "*.egg-info", "results",
)  # fmt: skip


@dataclass(frozen=True)
class Mutant:
    """One plausible bug: replace ``original`` (exactly once in ``path``) by ``mutated``."""

    name: str
    path: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    why: str


MUTANTS: tuple[Mutant, ...] = (
    # --- the three survivors of the hand mutation test of issue 15
    Mutant(
        "expon-q-non-strict-counts",
        "privconf_sklearn/mechanisms/expon_q.py",
        "below = cumulative - counts",
        "below = cumulative",
        ("tests/test_expon_q.py", "tests/test_expon_q_privacy.py"),
        "ExponQ utility counts scores <= e_j instead of the strict b_j = #{s < e_j}",
    ),
    Mutant(
        "pcoqs-inflation-without-union-bound",
        "privconf_sklearn/privacy/_gaussian.py",
        "return -self.noise_sd * float(ndtri(failure_probability / self.n_queries))",
        "return -self.noise_sd * float(ndtri(failure_probability))",
        ("tests/test_pcoqs.py", "tests/test_privacy_primitives.py"),
        "P-COQS inflated rank slack without the union bound over the N queries",
    ),
    Mutant(
        "dp-aps-laplace-scale",
        "privconf_sklearn/mechanisms/dp_aps.py",
        'return DiscreteLaplaceMechanism(epsilon, l1_sensitivity=n_bins)',
        'return DiscreteLaplaceMechanism(epsilon, l1_sensitivity=1)',
        ('tests/test_dp_aps.py',),
        "DP-APS Laplace scale 1/epsilon instead of B/epsilon (B-fold privacy loss)",
    ),
    # --- ExponQ
    Mutant(
        "expon-q-sign-flip",
        "privconf_sklearn/privacy/_exponential.py",
        "log_weights = self.epsilon * ((utilities - utilities.max()) / self.utility_range)",
        "log_weights = self.epsilon * ((utilities.max() - utilities) / self.utility_range)",
        (
            "tests/test_expon_q.py",
            "tests/test_expon_q_privacy.py",
            "tests/test_privacy_primitives.py",
        ),
        "exponential mechanism favours the worst edges",
    ),
    Mutant(
        "expon-q-tight-drops-epsilon",
        "privconf_sklearn/privacy/_exponential.py",
        "log_weights = self.epsilon * ((utilities - utilities.max()) / self.utility_range)",
        "log_weights = (utilities - utilities.max()) / self.utility_range",
        (
            "tests/test_expon_q.py",
            "tests/test_expon_q_privacy.py",
            "tests/test_privacy_primitives.py",
        ),
        "tight scaling ignores epsilon",
    ),
    Mutant(
        "expon-q-paper-drops-factor-2",
        "privconf_sklearn/privacy/_exponential.py",
        '_RANGE_PER_SENSITIVITY = {"standard": 2.0, "monotone": 1.0, "range-bounded": 1.0}',
        '_RANGE_PER_SENSITIVITY = {"standard": 1.0, "monotone": 1.0, "range-bounded": 1.0}',
        (
            "tests/test_expon_q.py",
            "tests/test_expon_q_privacy.py",
            "tests/test_privacy_primitives.py",
        ),
        "paper scaling without the 2 of the exponential mechanism: 2 epsilon spent",
    ),
    # --- split conformal and binning
    Mutant(
        "split-rank-off-by-one",
        "privconf_sklearn/_validation.py",
        "return math.ceil(Fraction(n + 1) * (1 - Fraction(alpha)))",
        "return math.ceil(Fraction(n) * (1 - Fraction(alpha)))",
        ("tests/test_split_conformal.py", "tests/test_coverage_central.py"),
        "split conformal rank ceil(n (1 - alpha)) instead of ceil((n + 1)(1 - alpha))",
    ),
    Mutant(
        "split-threshold-off-by-one",
        "privconf_sklearn/mechanisms/split.py",
        "threshold = statistics.kth_smallest(k)",
        "threshold = statistics.kth_smallest(k - 1)",
        ("tests/test_split_conformal.py", "tests/test_coverage_central.py"),
        "the (k-1)-th smallest score instead of the k-th",
    ),
    Mutant(
        "binning-no-rounding-fix",
        "privconf_sklearn/mechanisms/_binning.py",
        "    index[rows] += (scores > c / size).astype(np.intp) - (scores <= (c - 1.0) / size)",
        "    index[rows] -= scores <= (c - 1.0) / size",
        ("tests/test_binning.py", "tests/test_expon_q.py", "tests/test_dp_aps.py"),
        "a score just above an edge stays in the bin below (prediction-time test disagrees)",
    ),
    Mutant(
        "binning-unchecked-near-edges",
        "privconf_sklearn/mechanisms/_binning.py",
        "    near_integer = 0.5 - 2.0 * 2.0**-50 * size",
        "    near_integer = 0.5 - 2.0**-60 * size",
        ("tests/test_binning.py",),
        "scores whose product s m rounds across an integer are not checked against the edges",
    ),
    # --- P-COQS
    Mutant(
        "pcoqs-noise-sd-halved",
        "privconf_sklearn/privacy/_gaussian.py",
        "return self.sensitivity * math.sqrt(self.n_queries / (2.0 * self.rho))",
        "return self.sensitivity * math.sqrt(self.n_queries / (8.0 * self.rho))",
        ("tests/test_pcoqs.py", "tests/test_privacy_primitives.py"),
        "Gaussian noise half as wide as rho-zCDP needs",
    ),
    Mutant(
        "pcoqs-tau-drops-2",
        "privconf_sklearn/mechanisms/pcoqs.py",
        "tau=math.sqrt(n_queries / composer.rho * math.log(2.0 * n_queries / beta)),",
        "tau=math.sqrt(n_queries / composer.rho * math.log(n_queries / beta)),",
        ("tests/test_pcoqs.py",),
        "rank error of Proposition 1 without the two-sided factor 2",
    ),
    # --- DP-APS
    Mutant(
        "dp-aps-offset-drops-bins",
        "privconf_sklearn/privacy/_discrete_laplace.py",
        "return self.noise_isf(failure_probability / (2.0 * n_coordinates))",
        "return self.noise_isf(failure_probability / 2.0)",
        ("tests/test_dp_aps.py", "tests/test_exact_samplers.py"),
        "Laplace tail bound without the union bound over the B counts: lambda too small",
    ),
    # --- exact samplers (issue 24)
    Mutant(
        "exact-sampler-float-pass-without-margin",
        "privconf_sklearn/_random/_exponential.py",
        "margin = error + 8.0 * _UNIT * total",
        "margin = 0.0",
        ("tests/test_exact_samplers.py",),
        "the float pass trusts float64 cumulative weights as if they were exact",
    ),
    Mutant(
        "exact-sampler-refinement-wrong-side",
        "privconf_sklearn/_random/_exponential.py",
        "if (numerator + 1) * right_high <= (scale - numerator - 1) * left_low:",
        "if numerator * right_high <= (scale - numerator) * left_low:",
        ("tests/test_exact_samplers.py",),
        "the refinement decides U < boundary from the lower end of U's interval",
    ),
    Mutant(
        "bernoulli-exp-wrong-parity",
        "privconf_sklearn/_random/_discrete.py",
        "result[active[~keep]] = k % 2 == 1",
        "result[active[~keep]] = k % 2 == 0",
        ("tests/test_exact_samplers.py",),
        "vectorised Bernoulli(exp(-gamma)) returns 1 - exp(-gamma)",
    ),
    Mutant(
        "discrete-laplace-scale-drops-sensitivity",
        "privconf_sklearn/privacy/_discrete_laplace.py",
        "self._scale = Fraction(self.l1_sensitivity) / Fraction(self.epsilon)",
        "self._scale = 1 / Fraction(self.epsilon)",
        ("tests/test_exact_samplers.py", "tests/test_dp_aps.py"),
        "discrete Laplace noise of scale 1/epsilon whatever the sensitivity",
    ),
    Mutant(
        "exact-level-rounds-down",
        "privconf_sklearn/mechanisms/expon_q.py",
        "rounded = np.ceil(np.asarray(q, dtype=np.float64) * 2.0**LEVEL_BITS)",
        "rounded = np.floor(np.asarray(q, dtype=np.float64) * 2.0**LEVEL_BITS)",
        ("tests/test_expon_q.py",),
        "ExponQ's level rounded down: below the level its coverage proof needs",
    ),
    Mutant(
        "shaped-sampler-halves-epsilon",
        "privconf_sklearn/mechanisms/_shaped.py",
        'sampler = ExponentialMechanism(epsilon, 1.0, analysis="range-bounded")',
        'sampler = ExponentialMechanism(epsilon, 1.0, analysis="standard")',
        ("tests/test_expon_q_shaped.py", "tests/test_expon_q_privacy.py"),
        "the shaped release drawn at rate epsilon / 2, not the distribution it states",
    ),
    Mutant(
        "sparse-vector-query-noise-drops-share",
        "privconf_sklearn/mechanisms/_sparse_vector.py",
        "noise.discrete_laplace_first_crossing(1 / rate_query,",
        "noise.discrete_laplace_first_crossing(1 / (rate_threshold + rate_query),",
        ("tests/test_dp_aps_sparse_vector.py",),
        "the sparse vector's query noise at scale 1 / epsilon instead of 1 / epsilon_2",
    ),
    Mutant(
        "crossing-complement-off-by-one",
        "privconf_sklearn/_random/_exceedance.py",
        "index = np.where(upper, gaps, 1 - gaps)",
        "index = np.where(upper, gaps, -gaps)",
        ("tests/test_crossing_sampler.py",),
        "P(Z >= g) for g <= 0 taken as 1 - P(Z >= -g): the crossing events' law shifted by one",
    ),
    Mutant(
        "crossing-deep-tie-fails",
        "privconf_sklearn/_random/_exceedance.py",
        "            result[b] = _deep_comparison(source, rate, int(gaps[b]))",
        "            result[b] = False",
        ("tests/test_crossing_sampler.py",),
        "a uniform tied with P(Z >= g) on its first 72 bits counted as no crossing",
    ),
    Mutant(
        "crossing-vanishing-cut-below-ln2",
        "privconf_sklearn/_random/_exceedance.py",
        "    return -(-7 * n_bits // 10)",
        "    return -(-69 * n_bits // 100)",
        ("tests/test_crossing_sampler.py::test_digits_around_the_vanishing_tail_are_exact",),
        "digits of P(Z >= g) taken as 0 from r g >= 0.69 n, below n ln 2, where they need not be",
    ),
    Mutant(
        "dp-aps-beta-floor-dropped",
        "privconf_sklearn/mechanisms/dp_aps.py",
        '"beta": [Interval(Real, MIN_BETA, 1, closed="left")],',
        '"beta": [Interval(Real, 0, 1, closed="neither")],',
        ("tests/test_dp_aps_sparse_vector.py::test_tiny_beta_is_refused_by_name",),
        "a beta below the certificate's omitted mass accepted, with no parameter error",
    ),
    Mutant(
        "sparse-vector-offset-walk-unbounded",
        "privconf_sklearn/mechanisms/_sparse_vector.py",
        "        if value >= ceiling:",
        "        if False:",
        ("tests/test_dp_aps_sparse_vector.py::test_offset_search_stops_at_an_unreachable_beta",),
        "the search for the offset walks without bound at an unreachable beta (a hang)",
    ),
    # --- privacy accounting
    Mutant(
        "group-privacy-drops-factor-2",
        "privconf_sklearn/privacy/_guarantee.py",
        "epsilon=2.0 * self.epsilon",
        "epsilon=self.epsilon",
        ("tests/test_zcdp.py", "tests/test_accountant.py", "tests/test_expon_q_privacy.py"),
        "add/remove guarantee restated under replace-one without group privacy",
    ),
    Mutant(
        "zcdp-conversion-drops-2",
        "privconf_sklearn/privacy/_conversions.py",
        "return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))",
        "return rho + math.sqrt(rho * math.log(1.0 / delta))",
        ("tests/test_zcdp.py", "tests/test_pcoqs.py"),
        "Bun-Steinke conversion understates epsilon",
    ),
    # --- scores and honesty
    Mutant(
        "lac-score-sign",
        "privconf_sklearn/scores/classification.py",
        "return 1.0 - outputs[np.arange(outputs.shape[0]), y]",
        "return outputs[np.arange(outputs.shape[0]), y]",
        ("tests/test_scores.py", "tests/test_classifier.py"),
        "LAC score p_y instead of 1 - p_y",
    ),
    Mutant(
        "informative-at-the-top",
        "privconf_sklearn/mechanisms/_base.py",
        'object.__setattr__(self, "informative", bool(self.threshold < 1.0))',
        'object.__setattr__(self, "informative", bool(self.threshold <= 1.0))',
        ("tests/test_expon_q.py", "tests/test_dp_aps.py", "tests/test_classifier.py"),
        "a release at the top of the range (all labels) reported as informative",
    ),
    Mutant(
        "fedcp-agent-rank-off-by-one",
        "privconf_sklearn/mechanisms/fedcp/_agent.py",
        "ranks = [plan.local_ranks[j] for j in reading]",
        "ranks = [plan.local_ranks[j] - 1 for j in reading]",
        ("tests/test_fedcp.py", "tests/test_federated_protocol.py"),
        "each FedCP-QQ agent sends its (l-1)-th smallest score instead of the l-th",
    ),
    # --- added after the second round (engineers' reports)
    Mutant(
        "expon-q-tight-level-halves-slack",
        "privconf_sklearn/mechanisms/expon_q.py",
        "level = (target + np.sqrt(target * target + 4.0 * slack)) / 2.0",
        "level = (target + np.sqrt(target * target + 2.0 * slack)) / 2.0",
        ("tests/test_expon_q.py",),
        "tight q~ with half of Lemma 1's slack: coverage below 1 - alpha",
    ),
    Mutant(
        "fedcp2-correction-half-log",
        "privconf_sklearn/mechanisms/fedcp/_correction.py",
        "        log_term = math.log((n_bins - 1) / delta)\n        room = n_samples - rank",
        "        log_term = math.log((n_bins - 1) / delta) / 2\n        room = n_samples - rank",
        ("tests/test_fedcp.py",),
        "FedCP2-QQ rank correction from half the exponential mechanism's tail",
    ),
    Mutant(
        "fedcp2-record-moving-between-agents-free",
        "privconf_sklearn/mechanisms/fedcp/_server.py",
        'adjacency="add/remove",',
        'adjacency="replace-one and add/remove",',
        ("tests/test_fedcp.py",),
        "FedCP2-QQ states epsilon under replace-one: a record moving between agents changes "
        "two messages (2 epsilon)",
    ),
    Mutant(
        "fedcp-thresholded-plan-keeps-small-agents",
        "privconf_sklearn/mechanisms/fedcp/_search.py",
        "    kept = [n >= size for n in sizes]",
        "    kept = [n >= 1 for n in sizes]",
        ("tests/test_fedcp_unequal.py",),
        "a cut search's thresholded plan gives agents below the threshold a rank they "
        "cannot serve instead of the top of the range",
    ),
    Mutant(
        "federated-server-ignores-digest",
        "privconf_sklearn/federated/_protocol.py",
        "    digest = plan_digest(plan)\n    values = np.empty(plan.n_agents)",
        "    digest = None\n    values = np.empty(plan.n_agents)",
        ("tests/test_federated_protocol.py",),
        "the server accepts messages made for another plan",
    ),
    Mutant(
        "federated-agent-sends-exact-scores-by-default",
        "privconf_sklearn/federated/_protocol.py",
        "    if not allow_non_private:\n        raise ValueError(",
        "    if False:\n        raise ValueError(",
        ("tests/test_federated_agents.py",),
        "an agent answers a FedCP-QQ plan (an exact score) without allow_non_private",
    ),
    Mutant(
        "federated-agent-answers-a-plan-twice",
        "privconf_sklearn/federated/_ledger.py",
        '        if entry["plan_digest"] == plan_digest:',
        '        if entry["plan_digest"] == plan_digest and False:',
        ("tests/test_federated_agents.py",),
        "an agent answers the same plan again under a new round id",
    ),
    Mutant(
        "federated-ledger-unserialised",
        "privconf_sklearn/federated/_ledger.py",
        "        with self._lock, held:",
        "        with nullcontext(), nullcontext():",
        ("tests/test_federated_agents.py",),
        "threads sharing an agent ledger all pass the budget check on the same record",
    ),
    Mutant(
        "federated-agent-reads-scores-before-reserving",
        "privconf_sklearn/federated/_protocol.py",
        "    _check_size(scores, plan, agent)\n    noise",
        "    _check_size(check_unit_scores(scores), plan, agent)\n    noise",
        ("tests/test_federated_agents.py",),
        "an agent reads its scores before its ledger reserves the message's epsilon",
    ),
    Mutant(
        "federated-server-accepts-replays",
        "privconf_sklearn/federated/_protocol.py",
        '    if message["round"] != round_id:',
        '    if message["round"] != round_id and False:',
        ("tests/test_federated_agents.py",),
        "the federated server accepts a message replayed from another round",
    ),
    Mutant(
        "estimator-spends-ignoring-adjacency",
        "privconf_sklearn/_base.py",
        'privacy = calibration.privacy.under(run.params["adjacency"])',
        "privacy = calibration.privacy",
        ("tests/test_accountant.py",),
        "a monotone ExponQ under replace-one spends epsilon instead of 2 epsilon",
    ),
    Mutant(
        "mondrian-moving-row-counted-once",
        "privconf_sklearn/mondrian.py",
        "        [add_remove] * touched,\n",
        "        [add_remove] * min(touched, 1),\n",
        ("tests/test_mondrian.py",),
        "a row moving between groups touches one release only (parallel composition misused)",
    ),
    Mutant(
        "ledger-reserve-without-lock",
        "privconf_sklearn/_ledger.py",
        "    with _lock_of(ledger):\n        ledger.check(epsilon, delta)\n"
        "        ledger.spend(epsilon, delta)\n",
        "    ledger.check(epsilon, delta)\n    ledger.spend(epsilon, delta)\n",
        ("tests/test_budget_reservation.py::test_two_threads_one_budget_the_loser_reads_nothing",),
        "two threads both pass the check of the last budget and both spend it",
    ),
    Mutant(
        "mondrian-zcdp-group-read-by-epsilon",
        "privconf_sklearn/mondrian.py",
        "    return sum(c.privacy.reads_data for c in releases)",
        "    return sum(c.privacy.epsilon != 0 for c in releases)",
        ("tests/test_mondrian.py::test_zcdp_groups_that_read_rows_count_whatever_their_converted_epsilon",),
        "a group whose zCDP release converts to epsilon = 0 counted as not read",
    ),
    Mutant(
        "ledger-token-kept-after-fork",
        "privconf_sklearn/_ledger.py",
        "    _PROCESS_TOKEN = secrets.token_hex(16)\n    _REGISTRY = ",
        "    _REGISTRY = ",
        ("tests/test_budget_reservation.py::test_a_forked_child_does_not_resolve_to_its_copy_of_the_ledger",),
        "a forked child resolves a parent's ledger reference to its own copy",
    ),
    Mutant(
        "card-reader-accepts-duplicate-keys",
        "privconf_sklearn/cards/_codec.py",
        "if len(data) != len(pairs):",
        "if False:",
        ("tests/test_verifier.py",),
        "duplicate JSON keys in a card are accepted (last one wins)",
    ),
    # --- cards (issue 24: cards that bind everything they state)
    Mutant(
        "verifier-believes-any-zero-epsilon",
        "privconf_sklearn/cards/_verify.py",
        "untouched = untouched and released and not reachable and recorded.holds",
        "untouched = untouched and recorded.holds",
        ("tests/test_verifier.py",),
        "a card stating calibration epsilon 0 is believed although its release read data",
    ),
    Mutant(
        "card-entries-not-bound-to-groups",
        "privconf_sklearn/cards/_card.py",
        "    if [canonical_bytes(entry.group) for entry in entries] != listed:",
        "    if False:",
        ("tests/test_cards_mondrian.py", "tests/test_verifier.py"),
        "a Mondrian card may drop, relabel or invent groups of its public list",
    ),
    Mutant(
        "contract-ignores-adjacency",
        "privconf_sklearn/cards/_contract.py",
        "stated = privacy.under(contract.adjacency) if privacy.holds else privacy",
        "stated = privacy",
        ("tests/test_cards.py",),
        "eps_cal compared as stated, whatever the adjacency the contract requires",
    ),
    Mutant(
        "signature-skips-diagnostics",
        "privconf_sklearn/cards/_published.py",
        'return {**self.digest_payload(), "diagnostics": to_plain(self.diagnostics)}',
        "return self.digest_payload()",
        ("tests/test_verifier.py", "tests/test_risk_card.py"),
        "the signature covers the formal layer only: diagnostics can be edited",
    ),
    Mutant(
        "evaluate-publishes-private-test-data",
        "privconf_sklearn/cards/_published.py",
        "for name, value in found.items() if public else ():",
        "for name, value in found.items():",
        ("tests/test_cards.py", "tests/test_risk_card.py"),
        "a card's evaluate publishes the diagnostics of test data the owner did not declare public",
    ),
    Mutant(
        "risk-private-sizes-pad-without-loss",
        "privconf_sklearn/risk_control.py",
        "else np.eye(1, n_labels, dtype=bool)",
        "else np.zeros((1, n_labels), dtype=bool)",
        (
            "tests/test_risk_control_private_sizes.py::"
            "test_estimator_release_follows_the_exact_distribution",
        ),
        "risk control pads a small group with rows of zero loss instead of loss B",
    ),
    Mutant(
        "risk-private-sizes-bound-ignores-beta",
        "privconf_sklearn/risk_control.py",
        "    return alpha + beta * (loss_bound - alpha)",
        "    return alpha",
        ("tests/test_risk_control_private_sizes.py",),
        "a group's risk bound with private sizes leaves out the size release's failure beta",
    ),
    Mutant(
        "informative-clause-always-met",
        "privconf_sklearn/cards/_contract.py",
        "        satisfied = not trivial\n",
        "        satisfied = True\n",
        ("tests/test_cards.py",),
        "an all-label release meets a contract that requires an informative one",
    ),
    # --- survivors of the review of issue 26 (each killed by a test of the public API)
    Mutant(
        "zcdp-replace-one-rho-doubled-not-quadrupled",
        "privconf_sklearn/privacy/_guarantee.py",
        "rho = 4.0 * float(self.rho if self.rho is not None else 0.0)",
        "rho = 2.0 * float(self.rho if self.rho is not None else 0.0)",
        ("tests/test_zcdp.py",),
        "an add/remove rho-zCDP guarantee restated under replace-one as 2 rho, not 4 rho",
    ),
    Mutant(
        "mondrian-floor-drops-confidence",
        "privconf_sklearn/mondrian.py",
        "floor = min(floor, certificate.lower_bound * certificate.confidence)",
        "floor = min(floor, certificate.lower_bound)",
        ("tests/test_mondrian.py::test_private_sizes_floor_is_the_smallest_certified_marginal_bound",),
        "the private-size coverage floor forgets that a certificate holds with its confidence",
    ),
    Mutant(
        "mondrian-pads-with-zeros",
        "privconf_sklearn/mondrian.py",
        "np.concatenate([unit_scores[chosen], np.ones(n_padding)])",
        "np.concatenate([unit_scores[chosen], np.zeros(n_padding)])",
        ("tests/test_mondrian.py::test_a_group_smaller_than_its_released_size_is_padded_with_top_scores",),
        "a group smaller than its released size is padded with the lowest scores, not the top",
    ),
    Mutant(
        "dask-order-statistic-drops-lower-buckets",
        "privconf_sklearn/dask/_statistics.py",
        "below += int(cumulative[bucket - 1]) if bucket else 0",
        "below += 0",
        ("tests/test_dask_fit_calibrate.py",),
        "the cluster's k-th smallest score forgets the scores below the bucket it keeps",
    ),
    Mutant(
        "dask-rank-counter-loses-offset",
        "privconf_sklearn/dask/_statistics.py",
        "self._offset = self._at_most_left  #",
        "self._offset = 0  #",
        ("tests/test_dask_fit_calibrate.py",),
        "P-COQS on a cluster counts only the gathered scores, not those below them",
    ),
    Mutant(
        "dask-bin-counts-last-partition-only",
        "privconf_sklearn/dask/_statistics.py",
        "        total += part\n",
        "        total = part\n",
        ("tests/test_dask_fit_calibrate.py",),
        "the cluster's bin counts keep one partition instead of their sum",
    ),
    # --- public calibration steps (issue 26)
    Mutant(
        "calibration-run-scores-before-reservation",
        "privconf_sklearn/_calibration_run.py",
        'self._require(self._reserved is not None, "fix_score_range comes after reserve")',
        'self._require(True, "fix_score_range comes after reserve")',
        ("tests/test_calibration_run.py",),
        "a calibration run maps scores before its exact spend is reserved on the ledger",
    ),
)


def copy_repository(destination: Path) -> Path:
    """Copy the repository (sources, tests, configuration) under ``destination``."""
    target = destination / "repository"
    shutil.copytree(ROOT, target, ignore=IGNORED)
    return target


def run_tests(copy: Path, tests: tuple[str, ...], timeout: float) -> str:
    """``"passed"``, ``"failed"`` or ``"timeout"`` for the targeted tests in the copy."""
    command = [
        sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider",
        "--no-header", "-o", "addopts=", *tests,
    ]  # fmt: skip
    # ``python -m`` puts the working directory first on sys.path, so the copy's package
    # is imported, not an installed or editable one.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(
            command, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return "timeout"
    return "passed" if done.returncode == 0 else "failed"


def imports_the_copy(copy: Path) -> bool:
    """Whether a test run in ``copy`` imports the package from the copy."""
    done = subprocess.run(
        [sys.executable, "-c", "import privconf_sklearn; print(privconf_sklearn.__file__)"],
        cwd=copy, capture_output=True, text=True, check=False,
    )  # fmt: skip
    return done.returncode == 0 and Path(done.stdout.strip()).is_relative_to(copy)


def check(mutants, timeout: float, print_fn=print) -> dict[str, str]:
    """Run every mutant; return ``{name: "killed" | "survived" | "stale" | "timeout"}``."""
    outcome: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="mutation-check-") as directory:
        copy = copy_repository(Path(directory))
        if not imports_the_copy(copy):
            raise SystemExit("the tests would not import the copied package; aborting")
        for mutant in mutants:
            path = copy / mutant.path
            source = path.read_text(encoding="utf-8")
            if source.count(mutant.original) != 1:
                outcome[mutant.name] = "stale"
                print_fn(f"{'stale':<9} {mutant.name:<40} original text not found once")
                continue
            started = time.monotonic()
            path.write_text(source.replace(mutant.original, mutant.mutated), encoding="utf-8")
            try:
                result = run_tests(copy, mutant.tests, timeout)
            finally:
                path.write_text(source, encoding="utf-8")
            outcome[mutant.name] = {"failed": "killed", "passed": "survived"}.get(result, result)
            seconds = time.monotonic() - started
            print_fn(f"{outcome[mutant.name]:<9} {mutant.name:<40} {seconds:6.1f} s  {mutant.why}")
    return outcome


def main(argv=None) -> int:
    """Command line: run (or list) the mutants and print one line per mutant."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="run only these mutants")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 if a mutant survived or is stale"
    )
    args = parser.parse_args(argv)
    names = {mutant.name for mutant in MUTANTS}
    unknown = sorted(set(args.only or ()) - names)
    if unknown:
        parser.error(f"unknown mutants {unknown}; --list shows them")
    chosen = [m for m in MUTANTS if not args.only or m.name in args.only]
    if args.list:
        for mutant in chosen:
            print(f"{mutant.name:<40} {mutant.path}: {mutant.why}")
            print(f"{'':<40} tests: {' '.join(mutant.tests)}")
        return 0
    outcome = check(chosen, args.timeout)
    counts = {kind: sum(v == kind for v in outcome.values()) for kind in
              ("killed", "survived", "stale", "timeout")}  # fmt: skip
    print(", ".join(f"{count} {kind}" for kind, count in counts.items()))
    if args.strict and (counts["survived"] or counts["stale"]):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
