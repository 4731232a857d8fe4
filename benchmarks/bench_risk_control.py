"""Release time of conformal risk control at n = 10^6, against MAPIE's controller.

Multilabel false-negative-rate control at ``alpha = 0.1`` on MAPIE's grid of 100
thresholds, ``K = 5`` labels, per-label probabilities and labels already computed (the
model's ``predict_proba`` costs the same for both). MAPIE's
``MultiLabelClassificationController(method="crc", risk="recall").calibrate`` computes
its ``(n, 100)`` risk matrix in a Python loop over rows and thresholds: about 10^8 calls
at this size, i.e. hours, so it is not timed whole at n = 10^6. Contenders, alternating
in one process (``benchmarks/_timing.py``: median of per-round ratios with their range):

- ``MAPIE (vectorised risks)``: the same risk matrix computed with numpy outside MAPIE
  (one vectorised pass per threshold, 0.8 GB), then MAPIE's
  ``compute_best_predict_param()``: the fastest way to MAPIE's threshold from the same
  inputs;
- ``MAPIE final step``: ``compute_best_predict_param()`` alone, the risk matrix handed
  to it for free (a column mean and a search);
- ``SplitCRC`` and ``ExponCRC(1)``: from the probabilities and labels to the released
  threshold (the exact integer loss curve of ``FalseNegativeRate``, then the release,
  with the production noise source for ``ExponCRC``).

A second comparison times MAPIE's whole ``calibrate`` (its risk loop included) against
ours at n = 2000, where MAPIE's loop still runs in seconds.

Run:  python -m benchmarks.bench_risk_control [--quick] [--rounds R]
"""

from __future__ import annotations

import argparse

import numpy as np
from mapie.risk_control import MultiLabelClassificationController

from benchmarks._timing import alternate, load_average
from privconf_sklearn.mechanisms import ExponCRC, SplitCRC
from privconf_sklearn.risk_control import candidate_thresholds
from privconf_sklearn.scores import FalseNegativeRate

ALPHA = 0.1
GRID = np.arange(0, 1, 0.01)


def problem(n: int, k: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    proba = rng.uniform(size=(n, k))
    labels = rng.uniform(size=(n, k)) < proba
    labels[np.arange(n), np.argmax(proba, axis=1)] = True
    return proba, labels


def mapie_risks(proba, labels) -> np.ndarray:
    """MAPIE's risk matrix ``1 - recall`` per row and threshold (vectorised)."""
    positives = labels.sum(axis=1)
    risks = np.empty((proba.shape[0], GRID.shape[0]))
    for j, t in enumerate(GRID):
        risks[:, j] = 1 - ((proba > t) & labels).sum(axis=1) / positives
    return risks


def ours(mechanism, proba, labels):
    thresholds = candidate_thresholds(None)
    curve = FalseNegativeRate().loss_curve(proba, labels, thresholds)
    return thresholds[mechanism.calibrate_curve(curve, ALPHA).index]


def controller(proba):
    return MultiLabelClassificationController(
        predict_function=lambda rows: proba[rows],
        risk="recall",
        method="crc",
        target_level=1 - ALPHA,
        predict_params=GRID,
    )


def release_at_scale(n: int, rounds: int) -> None:
    proba, labels = problem(n)
    mapie = controller(proba)

    def mapie_vectorised():
        mapie._risks = mapie_risks(proba, labels)  # MAPIE's own loop would take hours
        return mapie.compute_best_predict_param()

    mapie_vectorised()
    assert float(mapie.best_predict_param[0]) == ours(SplitCRC(), proba, labels)
    result = alternate(
        {
            "MAPIE (vectorised risks)": mapie_vectorised,
            "MAPIE final step": mapie.compute_best_predict_param,
            "SplitCRC": lambda: ours(SplitCRC(), proba, labels),
            "ExponCRC(1)": lambda: ours(ExponCRC(1.0), proba, labels),
        },
        rounds,
    )
    print(f"n = {n:,}, K = 5, 100 thresholds; {load_average()}")
    for name in ("MAPIE (vectorised risks)", "MAPIE final step"):
        print(f"  {name:<26} median {result.median(name):.3f} s")
    for name in ("SplitCRC", "ExponCRC(1)"):
        print(
            f"  {name:<26} median {result.median(name):.3f} s: "
            f"{result.ratio_text(name, 'MAPIE (vectorised risks)')} of MAPIE (vectorised "
            f"risks), {result.ratio_text(name, 'MAPIE final step')} of its final step"
        )


def whole_calibration(n: int, rounds: int) -> None:
    proba, labels = problem(n, seed=1)
    rows = np.arange(n)
    result = alternate(
        {
            "MAPIE calibrate": lambda: controller(proba).calibrate(rows, labels.astype(int)),
            "ExponCRC(1)": lambda: ours(ExponCRC(1.0), proba, labels),
        },
        rounds,
    )
    print(f"n = {n:,}: whole calibration, MAPIE's risk loop included; {load_average()}")
    median, low, high = result.ratio("ExponCRC(1)", "MAPIE calibrate")
    print(
        f"  MAPIE calibrate median {result.median('MAPIE calibrate'):.3f} s; ExponCRC(1) "
        f"median {result.median('ExponCRC(1)'):.4f} s, {median:.2e}x ({low:.2e}-{high:.2e}) "
        "of MAPIE's"
    )


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 10^4 and 200, 2 rounds")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    rounds = 2 if args.quick else args.rounds
    release_at_scale(10**4 if args.quick else 10**6, rounds)
    whole_calibration(200 if args.quick else 2000, rounds)


if __name__ == "__main__":
    main()
