"""Reproduction of paper 002 (Romanus and Molinari), Sec. 5.1, Table 1 at epsilon_CP = 1.

Setting: the simulated two-Gaussian data (``make_two_gaussians``), n = 10000 split
60/24/16 (train / calibration / test), a diffprivlib Gaussian naive Bayes trained with
epsilon = 2, LAC scores, alpha = 0.1, calibration budget epsilon_CP = 1. Table 1 reports,
over 1000 runs: P-COQS coverage 0.8999, ExponQ coverage 0.9217, set sizes 1.3985 and
1.4841.

Why P-COQS runs with rho = epsilon^2 / 2 = 0.5 here: that is what the paper did (its
Sec. 5 treats epsilon-DP and (epsilon^2 / 2)-zCDP as equivalent). The implication only
goes one way: rho = 0.5 is NOT 1-DP; it is (4.38, 1e-5)-DP (DESIGN.md correction 2), so
this comparison is not at equal privacy, and the library reports P-COQS's guarantee as
zCDP with that conversion (checked below).

Our ExponQ uses the corrected sensitivity scaling (DESIGN.md correction 1) and a
deterministic number of bins, so it need not match the paper to the digit: the issue
asks for a mean coverage in [0.90, 0.94]. Model accuracy differs from the paper's 75%
(we give the model public feature bounds (-10, 10)); the coverage claims do not depend
on it.

Tolerances: the runs are independent (fresh data, model and noise per run), so each mean
is checked with a two-sided Student-t interval at the suite's false-failure level
(``FALSE_FAILURE`` = 1e-7), and the whole interval must lie inside the band. With 200
runs the half-width is about 0.004 for P-COQS (per-run sd ~ 0.0098, as in Table 1) and
0.006 for ExponQ: a false failure needs the true mean to sit within that of the band's
edge. The paper's 1000 runs would add nothing the interval does not already show.
"""

import math

import numpy as np
import pytest
from diffprivlib.accountant import BudgetAccountant
from diffprivlib.models import GaussianNB
from scipy import stats

from privconf_sklearn import PrivateConformalClassifier
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import PCOQS, ExponQ
from privconf_sklearn.metrics import mean_set_size, set_coverage

from ._stats import FALSE_FAILURE

RUNS = 200
N_SAMPLES, ALPHA, EPSILON_MODEL, EPSILON_CAL = 10000, 0.1, 2.0, 1.0
FEATURE_BOUNDS = (-10.0, 10.0)
PAPER_PCOQS_COVERAGE = 0.8999  # Table 1, epsilon_CP = 1


def _run(seed):
    X, y = make_two_gaussians(N_SAMPLES, random_state=seed)
    n_train, n_cal = int(0.6 * N_SAMPLES), int(0.24 * N_SAMPLES)
    X_train, y_train = X[:n_train], y[:n_train]
    X_cal, y_cal = X[n_train : n_train + n_cal], y[n_train : n_train + n_cal]
    X_test, y_test = X[n_train + n_cal :], y[n_train + n_cal :]
    model = GaussianNB(
        epsilon=EPSILON_MODEL,
        bounds=FEATURE_BOUNDS,
        accountant=BudgetAccountant(),
        random_state=seed,
    ).fit(X_train, y_train)
    row = {}
    mechanisms = {  # the paper's methods: rho = eps^2 / 2, the sensitivity-scaled ExponQ
        "pcoqs": PCOQS(rho=EPSILON_CAL**2 / 2),
        "exponq": ExponQ(epsilon=EPSILON_CAL, scaling="paper"),
    }
    for name, mechanism in mechanisms.items():
        estimator = PrivateConformalClassifier(
            model,
            mechanism=mechanism,
            alpha=ALPHA,
            conformity_score="lac",
            random_state=seed,
            accountant=BudgetAccountant(),
        ).fit_calibrate(X_cal, y_cal)
        sets = estimator.predict_set(X_test)
        row[name] = (set_coverage(y_test, sets, estimator.classes_), mean_set_size(sets))
        row[name + "_privacy"] = estimator.calibration_.privacy
    return row


def _interval(values):
    values = np.asarray(values, dtype=float)
    half_width = stats.t.isf(FALSE_FAILURE / 2, values.size - 1) * values.std(ddof=1)
    half_width /= math.sqrt(values.size)
    return values.mean() - half_width, values.mean() + half_width


@pytest.mark.slow
def test_table1_epsilon_cal_one():
    rows = [_run(seed) for seed in range(RUNS)]
    pcoqs_coverage = [row["pcoqs"][0] for row in rows]
    exponq_coverage = [row["exponq"][0] for row in rows]
    size_difference = [row["pcoqs"][1] - row["exponq"][1] for row in rows]

    low, high = _interval(pcoqs_coverage)
    assert PAPER_PCOQS_COVERAGE - 0.01 <= low and high <= PAPER_PCOQS_COVERAGE + 0.01
    low, high = _interval(exponq_coverage)
    assert 0.90 <= low and high <= 0.94
    # P-COQS gives smaller sets than ExponQ (paired over runs).
    _, high = _interval(size_difference)
    assert high < 0.0

    privacy = rows[0]["pcoqs_privacy"]
    assert (privacy.notion, privacy.rho) == ("zcdp", 0.5)
    assert privacy.epsilon == pytest.approx(4.377, abs=1e-3) and privacy.delta == 1e-5
    assert rows[0]["exponq_privacy"].epsilon == EPSILON_CAL
