"""ExponQ on load_diabetes: the uniform grid against public log-spaced grids.

The same 100 random splits as ``benchmarks.utility_table`` (45 / 25 / 30 %: 110
calibration rows), a standardised ``Ridge``, absolute residuals, public score bounds
``(0, H)`` for ``H`` in {350, 400, 1000} (350 and 400 bound the documented target range
25-346; 1000 is a loose bound). For each split the expected interval width and coverage
over the privacy noise are computed exactly from ``ExponQ.threshold_distribution``
(no sampling noise), then averaged over splits.

    python -m benchmarks.regression_grid [--splits 100]
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.utility_table import _split
from privconf_sklearn.mechanisms import ExponQ, LogGrid

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - optional
    tqdm = None

ALPHA = 0.1
BOUNDS = (350.0, 400.0, 1000.0)
EPSILONS = (0.5, 1.0, 2.0)
GRIDS = (("uniform", "uniform"), ("log r=0.1", LogGrid(0.1)), ("log r=0.01", LogGrid(0.01)))


def _expected(mechanism, calibration_residuals, test_residuals, bound):
    unit = np.minimum(calibration_residuals / bound, 1.0)
    values, log_p = mechanism.threshold_distribution(unit, ALPHA)
    p = np.exp(log_p)
    half = values * bound
    coverage = (test_residuals[None, :] <= half[:, None]).mean(axis=1)
    return float(p @ coverage), float(p @ (2 * half))


def main(argv=None) -> int:
    """Print the Markdown table of ``benchmarks/README.md``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=100)
    args = parser.parse_args(argv)
    X, y = load_diabetes(return_X_y=True)
    results: dict[tuple, list] = {}
    splits = range(args.splits)
    for split in tqdm(splits, desc="splits") if tqdm else splits:
        seed = 1000 * split + 7
        train, cal, test = _split(len(y), 0.25, seed)
        model = make_pipeline(StandardScaler(), Ridge()).fit(X[train], y[train])
        cal_res = np.abs(y[cal] - model.predict(X[cal]))
        test_res = np.abs(y[test] - model.predict(X[test]))
        for bound in BOUNDS:
            for epsilon in EPSILONS:
                for label, grid in GRIDS:
                    mechanism = ExponQ(epsilon=epsilon, grid=grid)
                    results.setdefault((bound, epsilon, label), []).append(
                        _expected(mechanism, cal_res, test_res, bound)
                    )
    print("| bounds | epsilon | " + " | ".join(label for label, _ in GRIDS) + " |")
    print("|---|---|" + "---|" * len(GRIDS))
    for bound in BOUNDS:
        for epsilon in EPSILONS:
            cells = []
            for label, _ in GRIDS:
                coverage, width = np.mean(results[(bound, epsilon, label)], axis=0)
                cells.append(f"{coverage:.3f} / {width:.0f}")
            print(f"| (0, {bound:g}) | {epsilon:g} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
