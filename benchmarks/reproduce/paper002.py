"""Paper 002 (Romanus and Molinari 2025) Sec. 5.1 and Appendices B-C, reproduced.

Design (Sec. 5.1, and the authors' ``paper_codes/Simulated_experiment`` notebooks):
``make_two_gaussians(n)`` (8 features, balanced classes, N(0.8, 7 I) against
N(-1, 8 I)), split 60 / 24 / 16 into train / calibration / test exactly as their two
``train_test_split(test_size=0.4)`` calls do; a model trained with ``epsilon_f = 2``;
LAC scores ``1 - p_y(x)``; default ``n = 10000``, ``alpha = 0.1``,
``epsilon_CP = 1``; 1000 runs per cell.

Models, as in the authors' code: diffprivlib ``GaussianNB(epsilon=2, bounds=(-20, 20),
random_state=42)``; diffprivlib ``RandomForestClassifier(epsilon=2, n_estimators=127,
max_depth=7, bounds=(-20, 20), random_state=42)``; scikit-learn ``GaussianNB()``. The
fixed ``random_state=42`` means every run reuses one draw of the model's privacy
noise (only the data change); ``model_seed=None`` draws it afresh per run instead.
The bounds (-20, 20) are what makes the paper's DP naive Bayes 75% accurate (81% with
(-10, 10)).

Runs share data, model and scores across every budget, level and method of the same
sample size (common random numbers): each cell's distribution is the paper's, and the
differences between cells are estimated more precisely. Each method's noise is seeded
from (run, n, alpha, epsilon_CP, method), so a cell's numbers do not depend on which
other tables run with it, nor on the number of worker processes.
"""

from __future__ import annotations

import math
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from privconf_sklearn._random import NoiseSource
from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.mechanisms import DPAPS, PCOQS, ExponQ, SplitConformal
from privconf_sklearn.scores import LAC

from ._evaluate import SetMetrics
from ._forest_cache import reuse_tree_skeletons
from ._paper002_numbers import PAPER_TABLES
from ._public_code import public_exponq_threshold, public_pcoqs_threshold

__all__ = ["METHODS", "TABLES", "Method", "Setting", "TableSpec", "run_model", "split_sizes"]

MODEL_EPSILON = 2.0
FEATURE_BOUNDS = (-20.0, 20.0)
PAPER_MODEL_SEED = 42
FOREST_TREES, FOREST_DEPTH = 127, 7
#: delta of the honest (epsilon, delta)-DP P-COQS columns.
HONEST_DELTA = 1e-5


@dataclass(frozen=True)
class Method:
    """One calibration method: a column of the reproduced tables.

    ``calibrate(scores, alpha, epsilon_cal, rng) -> (threshold, feasible)``;
    ``paper_column`` names the paper's column it is compared with (None: extra column);
    ``public_pipeline`` rounds calibration scores to 4 decimals first, as the authors'
    pipeline does.
    """

    label: str
    paper_column: str | None
    calibrate: Callable
    public_pipeline: bool = False


def _library(factory):
    def calibrate(scores, alpha, epsilon, rng):
        calibration = factory(epsilon).calibrate(scores, alpha, random_state=rng)
        return calibration.threshold, calibration.feasible

    return calibrate


def _split(epsilon):
    return SplitConformal()


def _exponq(epsilon):
    # The paper's method: Angelopoulos et al.'s sensitivity-scaled utility (the tight
    # scaling, this library's default, is compared in benchmarks/utility_table.py).
    return ExponQ(epsilon=epsilon, scaling="paper")


def _pcoqs_paper_rho(epsilon):
    return PCOQS(rho=epsilon**2 / 2)


def _pcoqs_rho_epsilon(epsilon):
    return PCOQS(rho=epsilon)


def _pcoqs_honest(epsilon):
    return PCOQS(epsilon=epsilon, delta=HONEST_DELTA)


def _pcoqs_honest_inflated(epsilon):
    return PCOQS(epsilon=epsilon, delta=HONEST_DELTA, inflated=True)


def _dp_aps(epsilon):
    return DPAPS(epsilon=epsilon, n_bins=20)  # the contract-cards paper's grid


def _exponq_public(scores, alpha, epsilon, rng):
    return public_exponq_threshold(scores, alpha, epsilon, NoiseSource(rng)), True


def _pcoqs_public(scores, alpha, epsilon, rng):
    return public_pcoqs_threshold(scores, alpha, epsilon**2 / 2, NoiseSource(rng)), True


def _pcoqs_public_rho_epsilon(scores, alpha, epsilon, rng):
    return public_pcoqs_threshold(scores, alpha, epsilon, NoiseSource(rng)), True


#: Every method, by key. Library mechanisms are called through ``calibrate``.
METHODS = {
    "exponq_public": Method("ExponQ as published", "ExponQ", _exponq_public, True),
    "exponq": Method("ExponQ (library)", "ExponQ", _library(_exponq)),
    "pcoqs_public": Method("P-COQS as published, rho=eps^2/2", "P-COQS", _pcoqs_public, True),
    "pcoqs_public_rho_eps": Method(
        "P-COQS as published, rho=eps", "P-COQS", _pcoqs_public_rho_epsilon, True
    ),
    "pcoqs": Method("P-COQS (library), rho=eps^2/2", "P-COQS", _library(_pcoqs_paper_rho)),
    "pcoqs_rho_eps": Method("P-COQS (library), rho=eps", "P-COQS", _library(_pcoqs_rho_epsilon)),
    "pcoqs_dp": Method("P-COQS, (eps, 1e-5)-DP", None, _library(_pcoqs_honest)),
    "pcoqs_dp_inflated": Method(
        "P-COQS inflated, (eps, 1e-5)-DP", None, _library(_pcoqs_honest_inflated)
    ),
    "dp_aps": Method("DP-APS, eps-DP", None, _library(_dp_aps)),
    "split": Method("split conformal (no privacy)", None, _library(_split)),
}
METHOD_KEYS = tuple(METHODS)
#: Columns of every table, in order.
TABLE_METHODS = (
    "exponq_public",
    "exponq",
    "pcoqs_public",
    "pcoqs_public_rho_eps",
    "pcoqs",
    "pcoqs_rho_eps",
    "pcoqs_dp",
    "pcoqs_dp_inflated",
    "dp_aps",
    "split",
)


@dataclass(frozen=True)
class Setting:
    """One cell row: total sample size, miscoverage level and calibration budget."""

    n_samples: int
    alpha: float
    epsilon_cal: float


@dataclass(frozen=True)
class TableSpec:
    """A reproduced table: model, the parameter it varies, its rows and columns."""

    name: str
    title: str
    model: str
    varying: str
    values: tuple[float, ...]
    methods: tuple[str, ...]
    paper: dict = field(repr=False, default_factory=dict)

    def setting(self, value: float) -> Setting:
        """The :class:`Setting` of the row where the varying parameter is ``value``."""
        base = {"n_samples": 10000, "alpha": 0.1, "epsilon_cal": 1.0}
        base[self.varying] = int(value) if self.varying == "n_samples" else float(value)
        return Setting(**base)

    @property
    def settings(self) -> tuple[Setting, ...]:
        """Rows, in the paper's order."""
        return tuple(self.setting(v) for v in self.values)


_BUDGETS = (0.1, 0.5, 1.0, 1.5, 3.0, 5.0, 10.0)
_SIZES = (100, 200, 500, 1000, 2000, 6000, 10000)
_ALPHAS = (0.01, 0.05, 0.1)
_MODEL_NAMES = {
    "dp_nb": "DP naive Bayes (diffprivlib, eps_f = 2)",
    "dp_rf": "DP random forest (diffprivlib, eps_f = 2)",
    "nb": "non-private naive Bayes (scikit-learn)",
}


def _spec(name, number, model, varying, values, methods):
    what = {"epsilon_cal": "epsilon_CP", "n_samples": "sample size n", "alpha": "alpha"}
    title = f"Paper 002 Table {number}: effect of {what[varying]}, {_MODEL_NAMES[model]}"
    return TableSpec(name, title, model, varying, values, methods, PAPER_TABLES[name])


#: The reproduced tables of paper 002 (Table 4 is assembled from Tables 1 and 13's runs).
TABLES = {
    spec.name: spec
    for spec in (
        _spec("paper002-table1", 1, "dp_nb", "epsilon_cal", _BUDGETS, TABLE_METHODS),
        _spec("paper002-table2", 2, "dp_nb", "n_samples", _SIZES, TABLE_METHODS),
        _spec("paper002-table3", 3, "dp_nb", "alpha", _ALPHAS, TABLE_METHODS),
        _spec("paper002-table8", 8, "dp_rf", "epsilon_cal", _BUDGETS, TABLE_METHODS),
        _spec("paper002-table9", 9, "dp_rf", "n_samples", _SIZES, TABLE_METHODS),
        _spec("paper002-table10", 10, "dp_rf", "alpha", _ALPHAS, TABLE_METHODS),
        _spec("paper002-table13", 13, "nb", "epsilon_cal", _BUDGETS, TABLE_METHODS),
    )
}


def split_sizes(n: int) -> tuple[int, int, int]:
    """Train / calibration / test sizes of two ``train_test_split(test_size=0.4)`` calls."""
    held_out = math.ceil(0.4 * n)
    n_test = math.ceil(0.4 * held_out)
    return n - held_out, held_out - n_test, n_test


def make_model(kind: str, seed: int):
    """The paper's model of ``kind`` ("dp_nb", "dp_rf" or "nb"), unfitted."""
    from diffprivlib.accountant import BudgetAccountant

    if kind == "dp_nb":
        from diffprivlib.models import GaussianNB

        return GaussianNB(
            epsilon=MODEL_EPSILON,
            bounds=FEATURE_BOUNDS,
            random_state=seed,
            accountant=BudgetAccountant(),
        )
    if kind == "dp_rf":
        from diffprivlib.models import RandomForestClassifier

        return RandomForestClassifier(
            epsilon=MODEL_EPSILON,
            n_estimators=FOREST_TREES,
            max_depth=FOREST_DEPTH,
            bounds=FEATURE_BOUNDS,
            classes=[0, 1],
            random_state=seed,
            accountant=BudgetAccountant(),
        )
    if kind == "nb":
        from sklearn.naive_bayes import GaussianNB

        return GaussianNB()
    raise ValueError(f"Unknown model kind {kind!r}; expected 'dp_nb', 'dp_rf' or 'nb'.")


def _seed(*parts) -> np.random.SeedSequence:
    """Seed from run-level integers and floats (floats by their micro-units)."""
    words = [0x002]
    for part in parts:
        if isinstance(part, str):
            words.append(zlib.crc32(part.encode()))
        elif isinstance(part, float):
            words.append(round(part * 1e6))
        else:
            words.append(int(part))
    return np.random.SeedSequence(words)


def _one_size(run, n, kind, model_seed, settings, method_lists):
    """Data, model and scores of one run at size ``n``, then every cell's calibrations."""
    X, y = make_two_gaussians(n, random_state=int(_seed(run, n, "data").generate_state(1)[0]))
    n_train, n_cal, _ = split_sizes(n)
    seed = (
        int(_seed(run, n, "model").generate_state(1)[0] >> 1) if model_seed is None else model_seed
    )
    model = make_model(kind, seed).fit(X[:n_train], y[:n_train])
    X_test, y_test = X[n_train + n_cal :], y[n_train + n_cal :]
    cal_proba = model.predict_proba(X[n_train : n_train + n_cal])
    cal_scores = LAC().conformity_scores(cal_proba, y[n_train : n_train + n_cal])
    public_scores = np.round(cal_scores, 4)
    test_proba = model.predict_proba(X_test)
    metrics = SetMetrics(1.0 - test_proba, y_test)
    accuracy = float(np.mean(model.predict(X_test) == y_test))

    rows = []
    for setting_id, setting in settings:
        for key in method_lists[setting_id]:
            method = METHODS[key]
            rng = np.random.default_rng(_seed(run, n, setting.alpha, setting.epsilon_cal, key))
            scores = public_scores if method.public_pipeline else cal_scores
            start = time.perf_counter()
            threshold, feasible = method.calibrate(scores, setting.alpha, setting.epsilon_cal, rng)
            seconds = time.perf_counter() - start
            rows.append((run, setting_id, METHOD_KEYS.index(key), threshold, seconds, feasible))
    records = np.array(rows, dtype=np.float64).reshape(-1, 6)
    coverage, size, singleton = metrics(records[:, 3])
    return np.column_stack([records, coverage, size, singleton]), (run, n, accuracy)


def _run_chunk(chunk):
    """Worker: all runs of ``chunk`` (picklable arguments only)."""
    runs, kind, model_seed, settings, method_lists = chunk
    by_size: dict[int, list] = {}
    for setting_id, setting in enumerate(settings):
        by_size.setdefault(setting.n_samples, []).append((setting_id, setting))
    records, accuracy = [], []
    with warnings.catch_warnings(), reuse_tree_skeletons():
        # Infeasible calibrations (small n) are counted in the tables, not warned about.
        warnings.simplefilter("ignore")
        for run in runs:
            for n, group in by_size.items():
                rows, acc = _one_size(run, n, kind, model_seed, group, method_lists)
                records.append(rows)
                accuracy.append(acc)
    return np.vstack(records), np.array(accuracy)


#: Column names of the per-run records returned by :func:`run_model`.
RECORD_COLUMNS = (
    "run",
    "setting",
    "method",
    "threshold",
    "seconds",
    "feasible",
    "coverage",
    "size",
    "singleton",
)


def run_model(
    kind: str,
    settings: list[Setting],
    method_lists: list[tuple[str, ...]],
    runs: int,
    *,
    model_seed: int | None = PAPER_MODEL_SEED,
    jobs: int = 1,
    chunk_size: int = 10,
):
    """Run ``runs`` Monte Carlo replications of every setting with one model kind.

    Parameters
    ----------
    kind : {"dp_nb", "dp_rf", "nb"}
        Model.
    settings : list of Setting
        Cells; settings with the same ``n_samples`` share data and model within a run.
    method_lists : list of tuple of str
        Method keys evaluated for each setting.
    runs : int
        Replications.
    model_seed : int or None, default=42
        ``random_state`` of every model fit (the paper's 42); None draws one per run.
    jobs : int, default=1
        Worker processes.
    chunk_size : int, default=10
        Runs per task.

    Returns
    -------
    records : ndarray of shape (k, 9)
        One row per (run, setting, method), columns :data:`RECORD_COLUMNS`.
    accuracy : ndarray of shape (runs * sizes, 3)
        ``(run, n, test accuracy)``.
    """
    from ._parallel import run_chunks

    chunks = [
        (list(range(start, min(start + chunk_size, runs))), kind, model_seed, settings,
         method_lists)
        for start in range(0, runs, chunk_size)
    ]  # fmt: skip
    results = run_chunks(_run_chunk, chunks, jobs=jobs, desc=f"paper 002, {kind}", total=runs)
    return np.vstack([r[0] for r in results]), np.vstack([r[1] for r in results])
