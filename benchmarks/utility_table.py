"""Utility of every mechanism on data that ship with scikit-learn, over random splits.

For ``load_digits`` and ``load_breast_cancer`` (classification: a standardised
``LogisticRegression``, LAC score) and ``load_diabetes`` (regression: ``Ridge``,
absolute residual with the public score bounds ``(0, 400)``, the documented range of the
target), every split draws fresh train / calibration / test rows (40 / 30 / 30 %;
diabetes 45 / 25 / 30 %, so ``n_cal`` = 539, 171 and 110 as in issue 12), fits the model
and calibrates it with every mechanism at ``alpha = 0.1`` and each ``epsilon``. Recorded
per mechanism: mean test coverage, mean set size (classification) or interval width
(regression), and the share of trivial releases (threshold at the top of the public
range: every label / bound-wide intervals). Federated mechanisms spread the calibration
rows over 5 agents at random. P-COQS runs through its ``(epsilon, delta)`` entry
(``delta = 1e-5``) at the same ``epsilon`` as the pure-DP mechanisms.

The script uses only constructor calls that every released version of the library
accepts, so "before" and "after" numbers come from the same code::

    python -m benchmarks.utility_table --label after            # this checkout
    PYTHONPATH=/path/to/old/checkout python benchmarks/utility_table.py --label before
    python -m benchmarks.utility_table --compare before after   # Markdown table

Results go to ``benchmarks/results/utility_<label>.json`` (not versioned); ``--compare``
prints the table of ``benchmarks/README.md`` and, with matplotlib, saves
``benchmarks/figures/utility.png``. ``--quick`` runs 3 splits at one epsilon.
"""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privconf_sklearn import PrivateConformalClassifier, PrivateConformalRegressor
from privconf_sklearn.mechanisms import DPAPS, PCOQS, ExponQ, FedCP2QQ, FedCPQQ, SplitConformal

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - optional
    tqdm = None

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
ALPHA = 0.1
EPSILONS = (0.5, 1.0, 2.0)
N_AGENTS = 5
PCOQS_DELTA = 1e-5
#: Public range of |y - f(x)| on load_diabetes (targets documented in [25, 346]).
DIABETES_SCORE_BOUNDS = (0.0, 400.0)

DATASETS = {
    # name: (loader, task, calibration fraction of the non-test rows' complement)
    "digits": (load_digits, "classification", 0.3),
    "breast_cancer": (load_breast_cancer, "classification", 0.3),
    "diabetes": (load_diabetes, "regression", 0.25),
}


def mechanisms(epsilon: float):
    """``(label, mechanism)`` at one budget; non-private ones are listed by the caller."""
    return [
        ("ExponQ", ExponQ(epsilon=epsilon)),
        ("P-COQS", PCOQS(epsilon=epsilon, delta=PCOQS_DELTA)),
        ("P-COQS inflated", PCOQS(epsilon=epsilon, delta=PCOQS_DELTA, inflated=True)),
        ("DP-APS", DPAPS(epsilon=epsilon)),
        ("FedCP2-QQ", FedCP2QQ(epsilon=epsilon)),
    ]


NON_PRIVATE = [("SplitConformal", SplitConformal), ("FedCP-QQ", FedCPQQ)]


def _split(n: int, calibration: float, seed: int):
    rows = np.arange(n)
    rest, test = train_test_split(rows, test_size=0.3, random_state=seed)
    train, cal = train_test_split(rest, test_size=calibration / 0.7, random_state=seed + 1)
    return train, cal, test


def _model(task: str):
    if task == "classification":
        return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    return make_pipeline(StandardScaler(), Ridge())


def _evaluate(task, model, mechanism, X_cal, y_cal, X_test, y_test, groups, seed):
    if task == "classification":
        estimator = PrivateConformalClassifier(
            model, mechanism=mechanism, alpha=ALPHA, random_state=seed
        )
    else:
        estimator = PrivateConformalRegressor(
            model,
            mechanism=mechanism,
            alpha=ALPHA,
            score_bounds=DIABETES_SCORE_BOUNDS,
            random_state=seed,
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        estimator.fit_calibrate(X_cal, y_cal, groups=groups if mechanism.requires_groups else None)
        sets = estimator.predict_set(X_test)
    trivial = estimator.calibration_.threshold >= 1.0
    if task == "classification":
        columns = np.searchsorted(estimator.classes_, y_test)
        covered = sets[np.arange(len(y_test)), columns]
        size = sets.sum(axis=1).mean()
    else:
        covered = (sets[:, 0] <= y_test) & (y_test <= sets[:, 1])
        size = (sets[:, 1] - sets[:, 0]).mean()
    return float(covered.mean()), float(size), bool(trivial)


def run(label: str, n_splits: int, epsilons) -> dict:
    """All datasets x splits x mechanisms; returns the per-run records."""
    records: dict[str, list] = {}
    total = len(DATASETS) * n_splits
    bar = tqdm(total=total, desc=f"utility ({label})") if tqdm else None
    for name, (loader, task, calibration) in DATASETS.items():
        X, y = loader(return_X_y=True)
        for split in range(n_splits):
            seed = 1000 * split + 7
            train, cal, test = _split(len(y), calibration, seed)
            model = _model(task).fit(X[train], y[train])
            groups = np.random.default_rng(seed).integers(0, N_AGENTS, size=len(cal))
            args = (X[cal], y[cal], X[test], y[test], groups, seed)
            for mech_label, factory in NON_PRIVATE:
                key = f"{name}|{mech_label}|inf"
                records.setdefault(key, []).append(_evaluate(task, model, factory(), *args))
            for epsilon in epsilons:
                for mech_label, mechanism in mechanisms(epsilon):
                    key = f"{name}|{mech_label}|{epsilon:g}"
                    records.setdefault(key, []).append(
                        _evaluate(task, model, mechanism, *args)
                    )
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    return {"label": label, "alpha": ALPHA, "n_splits": n_splits, "records": records}


def _summary(runs) -> tuple[float, float, float]:
    values = np.asarray(runs, dtype=float)
    return float(values[:, 0].mean()), float(values[:, 1].mean()), float(values[:, 2].mean())


def compare(before: dict, after: dict) -> str:
    """Markdown table: coverage / size / trivial share, before -> after."""
    lines = [
        f"alpha = {after['alpha']}, {after['n_splits']} random splits per dataset "
        f"(before: {before['n_splits']}). Cells: mean coverage / mean set size (interval "
        "width for diabetes) / share of trivial releases, before -> after.",
        "",
        "| dataset | mechanism | epsilon | before | after |",
        "|---|---|---|---|---|",
    ]
    for key in after["records"]:
        name, mechanism, epsilon = key.split("|")
        cells = []
        for result in (before, after):
            runs = result["records"].get(key)
            if not runs:
                cells.append("-")
                continue
            coverage, size, trivial = _summary(runs)
            cells.append(f"{coverage:.3f} / {size:.2f} / {trivial:.0%}")
        lines.append(f"| {name} | {mechanism} | {epsilon} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def figure(before: dict, after: dict, path: Path) -> None:
    """Mean set size / width per mechanism and epsilon, before and after (one panel each)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(DATASETS), figsize=(5 * len(DATASETS), 4.2))
    for ax, name in zip(axes, DATASETS, strict=True):
        keys = [k for k in after["records"] if k.startswith(f"{name}|")]
        labels = [k.split("|", 1)[1].replace("|", "\neps=") for k in keys]
        x = np.arange(len(keys))
        for offset, (result, tag) in enumerate(((before, "before"), (after, "after"))):
            sizes = [
                _summary(result["records"][k])[1] if k in result["records"] else np.nan
                for k in keys
            ]
            ax.bar(x + (offset - 0.5) * 0.4, sizes, width=0.4, label=tag)
        ax.set_xticks(x, labels, rotation=90, fontsize=7)
        ax.set_title(name)
        ax.set_ylabel("interval width" if name == "diabetes" else "mean set size")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    """Command line (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="after")
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="3 splits, epsilon = 1 only")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    if args.compare:
        before, after = (
            json.loads((RESULTS / f"utility_{label}.json").read_text()) for label in args.compare
        )
        print(compare(before, after))
        try:
            figure(before, after, HERE / "figures" / "utility.png")
        except ImportError:
            print("(matplotlib not installed: no figure)")
        return 0
    splits, epsilons = (3, (1.0,)) if args.quick else (args.splits, EPSILONS)
    result = run(args.label, splits, epsilons)
    out = RESULTS / f"utility_{args.label}.json"
    out.write_text(json.dumps(result))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
