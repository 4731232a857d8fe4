"""Private conformal risk control against MAPIE's non-private CRC (issue 25).

The false-negative rate of multilabel sets ``{k : p_k(x) > t}`` is controlled at
``alpha = 0.1`` on MAPIE's grid ``t = 0, 0.01, ..., 0.99`` (plus the set of every label).
Non-private: ``SplitCRC``, which equals MAPIE 1.6's
``MultiLabelClassificationController(method="crc", risk="recall")`` (checked on the
first splits of every size up to 2000 here, and on random problems by the test suite).
Private: ``ExponCRC(epsilon)`` at epsilon 0.5 / 1 / 2.

Data:

- ``synthetic``: ``make_multilabel_classification`` (5 labels, 2 per row on average,
  no row without a label, 20 features, ``random_state=0``): 2000 training rows, a pool
  of 12000 calibration rows, 5000 test rows;
- ``digits``: scikit-learn's ``load_digits`` turned into a multilabel task: each digit
  has six attributes (even, at least 5, prime, a closed loop {0, 6, 8, 9}, straight
  strokes only {1, 4, 7}, a multiple of 3 {0, 3, 6, 9}), every digit has at least one;
  600 training rows, a pool of 797 calibration rows (so only n = 500 fits), 400 test
  rows.

The model is ``MultiOutputClassifier`` of a standardised ``LogisticRegression``. Every
split draws ``n`` calibration rows from the pool without replacement and releases both
thresholds on them (the privacy noise from a seeded generator, for reproducibility).
Reported per (data, n, epsilon), means over the splits: the released threshold, the
test mean set size (labels per set) and mean FNR, the set-size ratio private / CRC,
and the share of trivial releases (every label) with the share that warned. Beside
them, the data-free forecast of the release (``ExponCRC.forecast``) under two curves:
the idealised FNR curve ``t^2`` (a calibrated model with uniform probabilities, the
default of ``PrivateRiskControlClassifier.forecast``) and a "pilot" curve, the model's
mean FNR on its training rows (no calibration or test row).

Run::

    python -m benchmarks.risk_control_table            # about 5 minutes
    python -m benchmarks.risk_control_table --quick    # smoke run

The Markdown table is printed (and copied into ``benchmarks/README.md``); with
matplotlib the figure goes to ``benchmarks/figures/risk_control.png``.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits, make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.multioutput import MultiOutputClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from privconf_sklearn.mechanisms import (
    ExponCRC,
    SplitCRC,
    UninformativeCalibrationWarning,
)
from privconf_sklearn.risk_control import candidate_thresholds
from privconf_sklearn.scores import FalseNegativeRate

try:
    from tqdm import tqdm
except ImportError:  # pragma: no cover - optional
    tqdm = None

HERE = Path(__file__).resolve().parent
ALPHA = 0.1
EPSILONS = (0.5, 1.0, 2.0)
SIZES = (500, 2000, 10000)
THRESHOLDS = candidate_thresholds(None)  # MAPIE's grid, decreasing, then -inf

#: Attributes of each digit 0..9 (columns: even, >= 5, prime, loop, straight, 3 | d).
DIGIT_ATTRIBUTES = np.array(
    [
        [d % 2 == 0, d >= 5, d in (2, 3, 5, 7), d in (0, 6, 8, 9), d in (1, 4, 7), d % 3 == 0]
        for d in range(10)
    ],
    dtype=int,
)


def load_data(name: str, quick: bool):
    """``(X_train, Y_train, X_pool, Y_pool, X_test, Y_test)`` of a data set."""
    if name == "digits":
        X, digit = load_digits(return_X_y=True)
        Y = DIGIT_ATTRIBUTES[digit]
        order = np.random.default_rng(0).permutation(len(X))
        X, Y = X[order], Y[order]
        return X[:600], Y[:600], X[600:1397], Y[600:1397], X[1397:], Y[1397:]
    sizes = (500, 2500, 1000) if quick else (2000, 12000, 5000)
    X, Y = make_multilabel_classification(
        sum(sizes), n_features=20, n_classes=5, n_labels=2, allow_unlabeled=False, random_state=0
    )
    a, b = sizes[0], sizes[0] + sizes[1]
    return X[:a], Y[:a], X[a:b], Y[a:b], X[b:], Y[b:]


def label_probabilities(model, X) -> np.ndarray:
    return np.column_stack([p[:, 1] for p in model.predict_proba(X)])


def per_candidate(proba, Y):
    """Mean set size and mean FNR at every candidate threshold."""
    Y = Y.astype(bool)
    sets = proba[:, None, :] > THRESHOLDS[None, :, None]
    size = sets.sum(axis=2).mean(axis=0)
    fnr = (1 - (sets & Y[:, None, :]).sum(axis=2) / Y.sum(axis=1)[:, None]).mean(axis=0)
    return size, fnr


def mapie_threshold(proba, Y) -> float:
    from mapie.risk_control import MultiLabelClassificationController

    controller = MultiLabelClassificationController(
        predict_function=lambda rows: proba[rows],
        risk="recall",
        method="crc",
        target_level=1 - ALPHA,
        predict_params=np.arange(0, 1, 0.01),
    )
    controller.calibrate(np.arange(len(proba)), Y)
    return float(controller.best_predict_param[0])


def run_dataset(name, quick, splits, progress):
    X_train, Y_train, X_pool, Y_pool, X_test, Y_test = load_data(name, quick)
    model = MultiOutputClassifier(make_pipeline(StandardScaler(), LogisticRegression()))
    model.fit(X_train, Y_train)
    pool, test = label_probabilities(model, X_pool), label_probabilities(model, X_test)
    size, fnr = per_candidate(test, Y_test)
    _, pilot = per_candidate(label_probabilities(model, X_train), Y_train)
    pilot = np.maximum.accumulate(pilot[::-1])[::-1]  # non-increasing (it is, up to ties)
    rng = np.random.default_rng(1)
    rows, mapie_checks = [], [0, 0]
    for n in (400,) if quick else [s for s in SIZES if s <= len(pool)]:
        records = {eps: [] for eps in (None, *EPSILONS)}
        for split in range(splits):
            chosen = rng.choice(len(pool), size=n, replace=False)
            curve = FalseNegativeRate().loss_curve(
                pool[chosen], Y_pool[chosen].astype(bool), THRESHOLDS
            )
            exact = SplitCRC().calibrate_curve(curve, ALPHA).index
            records[None].append((exact, False))
            if split == 0 and n <= 2000 and not quick:
                mapie_checks[0] += 1
                mapie_checks[1] += THRESHOLDS[exact] == mapie_threshold(
                    pool[chosen], Y_pool[chosen]
                )
            for epsilon in EPSILONS:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always", UninformativeCalibrationWarning)
                    index = ExponCRC(epsilon).calibrate_curve(curve, ALPHA, random_state=rng).index
                warned = any(
                    issubclass(w.category, UninformativeCalibrationWarning) for w in caught
                )
                records[epsilon].append((index, warned))
            progress.update(1)
        for epsilon in EPSILONS:
            rows.append(summarise(name, n, epsilon, records, size, fnr, pilot))
    return rows, mapie_checks


def summarise(name, n, epsilon, records, size, fnr, pilot):
    exact = np.array([i for i, _ in records[None]])
    private = np.array([i for i, _ in records[epsilon]])
    warned = np.array([w for _, w in records[epsilon]])
    trivial = private == len(THRESHOLDS) - 1
    m = len(THRESHOLDS)
    ideal = FalseNegativeRate().idealised_mean_loss(THRESHOLDS)
    forecasts = {
        "ideal": ExponCRC(epsilon).forecast(n, ALPHA, m, mean_loss=ideal),
        "pilot": ExponCRC(epsilon).forecast(n, ALPHA, m, mean_loss=pilot),
    }
    finite = np.where(np.isfinite(THRESHOLDS), THRESHOLDS, 0.0)
    return {
        "data": name,
        "n": n,
        "epsilon": epsilon,
        "crc_threshold": float(finite[exact].mean()),
        "private_threshold": float(finite[private].mean()),
        "private_threshold_sd": float(finite[private].std()),
        "forecast_pilot": float(forecasts["pilot"].index_probabilities @ finite),
        "forecast_ideal": float(forecasts["ideal"].index_probabilities @ finite),
        "forecast_informative": float(forecasts["pilot"].informative_probability),
        "crc_size": float(size[exact].mean()),
        "private_size": float(size[private].mean()),
        "crc_fnr": float(fnr[exact].mean()),
        "private_fnr": float(fnr[private].mean()),
        "trivial": float(trivial.mean()),
        "trivial_warned": bool(np.all(warned[trivial])),
    }


def markdown(rows) -> str:
    lines = [
        "| data | n | epsilon | CRC threshold | private threshold (sd) | forecast: pilot / ideal "
        "(P informative) | set size CRC / private (ratio) | FNR CRC / private "
        "| trivial (all warned) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = r["private_size"] / r["crc_size"]
        lines.append(
            f"| {r['data']} | {r['n']} | {r['epsilon']:g} | {r['crc_threshold']:.3f} "
            f"| {r['private_threshold']:.3f} ({r['private_threshold_sd']:.3f}) "
            f"| {r['forecast_pilot']:.3f} / {r['forecast_ideal']:.3f} "
            f"({r['forecast_informative']:.3f}) "
            f"| {r['crc_size']:.2f} / {r['private_size']:.2f} ({ratio:.3f}) "
            f"| {r['crc_fnr']:.3f} / {r['private_fnr']:.3f} "
            f"| {100 * r['trivial']:.0f}% ({'yes' if r['trivial_warned'] else 'NO'}) |"
        )
    return "\n".join(lines)


def figure(rows, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for name, marker in (("synthetic", "o"), ("digits", "s")):
        for epsilon, color in zip(EPSILONS, ("tab:red", "tab:orange", "tab:green"), strict=True):
            chosen = [r for r in rows if r["data"] == name and r["epsilon"] == epsilon]
            if chosen:
                ax.plot(
                    [r["n"] for r in chosen],
                    [r["private_size"] / r["crc_size"] for r in chosen],
                    marker=marker,
                    color=color,
                    label=f"{name}, epsilon {epsilon:g}",
                )
    ax.axhline(1.15, color="grey", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_xlabel("calibration rows n")
    ax.set_ylabel("mean set size: private / CRC")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small data, 3 splits")
    parser.add_argument("--splits", type=int, default=100)
    parser.add_argument("--figure", type=Path, default=HERE / "figures" / "risk_control.png")
    args = parser.parse_args(argv)
    splits = 3 if args.quick else args.splits
    total = splits * (2 if args.quick else len(SIZES) + 1)  # digits: n = 500 only
    progress = tqdm(total=total, desc="splits") if tqdm is not None else _NoProgress()
    rows, checks = [], [0, 0]
    for name in ("synthetic", "digits"):
        found, mapie = run_dataset(name, args.quick, splits, progress)
        rows += found
        checks = [checks[0] + mapie[0], checks[1] + mapie[1]]
    progress.close()
    print(markdown(rows))
    if checks[0]:
        print(f"\nSplitCRC = MAPIE's threshold on {checks[1]} of {checks[0]} checked splits.")
    try:
        figure(rows, args.figure)
        print(f"figure: {args.figure}")
    except ImportError:  # pragma: no cover - optional
        pass
    return rows


class _NoProgress:
    def update(self, _):
        pass

    def close(self):
        pass


if __name__ == "__main__":
    main()
