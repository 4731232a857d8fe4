"""The level ExponQ aims at: the paper's scaling, the tight analysis and the shaped default.

For ``n`` from 100 to ``10^6`` (log-spaced) at ``alpha = 0.1`` and epsilon in
{0.5, 1, 2}: the target level of
:meth:`~privconf_sklearn.mechanisms.ExponQ.resolve_parameters` (``q~`` for the paper's
utility, ``k / n`` for the shaped one) for ``scaling="paper"``
(``exp(-eps w / (2 Delta_q))``), ``"tight"`` (``exp(-eps q (1 - q) w)``) and the default
``"shaped"`` (integrated certificate). Left: the level itself (``>= 1`` is unreachable:
full sets); right: the excess over ``1 - alpha`` on log axes. Public quantities only,
no data.

    python benchmarks/figure_exponq_level.py                 # table + figure
    python benchmarks/figure_exponq_level.py --output DIR    # figure elsewhere

Prints the levels at a few sizes and writes ``exponq_level.png`` to
``benchmarks/figures/`` (the documentation build draws its own; needs matplotlib).
Takes a few seconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from privconf_sklearn.mechanisms import ExponQ

ROOT = Path(__file__).resolve().parents[1]
FIGURE_DIRS = (ROOT / "benchmarks" / "figures",)  # the docs build draws its own copy
ALPHA = 0.1
EPSILONS = (0.5, 1.0, 2.0)
SIZES = np.unique(np.round(np.geomspace(100, 10**6, 81)).astype(int))
TABLE_SIZES = (100, 171, 300, 1000, 2400, 10**4, 10**5, 10**6)
SCALINGS = {"paper": "paper", "tight": "tight", "shaped": "shaped (default)"}


def level(n: int, epsilon: float, scaling: str) -> float:
    """The target level (``q~``; ``k / n`` for the shaped utility), >= 1 when unreachable."""
    return ExponQ(epsilon, scaling=scaling).resolve_parameters(int(n), ALPHA).level


def run() -> dict[tuple[str, float], np.ndarray]:
    """``q~`` over :data:`SIZES` for every scaling and epsilon."""
    return {
        (scaling, epsilon): np.array([level(n, epsilon, scaling) for n in SIZES])
        for scaling in SCALINGS
        for epsilon in EPSILONS
    }


def print_table() -> None:
    print(f"target level at alpha = {ALPHA:g} (>= 1: unreachable)")
    header = "| n | " + " | ".join(
        f"eps={e:g} {label}" for e in EPSILONS for label in SCALINGS.values()
    )
    print(header + " |")
    print("|---:|" + "---:|" * (len(EPSILONS) * len(SCALINGS)))
    for n in TABLE_SIZES:
        cells = [f"{level(n, e, s):.4f}" for e in EPSILONS for s in SCALINGS]
        print(f"| {n:,} | " + " | ".join(cells) + " |")


def plot(levels: dict, outputs: list[Path]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    colors = dict(zip(EPSILONS, plt.cm.viridis(np.linspace(0.0, 0.8, len(EPSILONS))), strict=True))
    for (scaling, epsilon), values in levels.items():
        style = {"paper": "--", "tight": ":", "shaped": "-"}[scaling]
        label = f"eps = {epsilon:g}, {SCALINGS[scaling]}"
        axes[0].plot(SIZES, np.minimum(values, 1.05), style, color=colors[epsilon], label=label)
        axes[1].plot(SIZES, values - (1 - ALPHA), style, color=colors[epsilon], label=label)
    axes[0].axhline(1.0, color="grey", lw=0.8)
    axes[0].axhline(1 - ALPHA, color="grey", lw=0.8, ls=":")
    axes[0].set_ylim(1 - ALPHA - 0.01, 1.05)
    axes[0].set_ylabel("target level (capped at 1.05)")
    axes[1].set_yscale("log")
    axes[1].set_ylabel("target level - (1 - alpha)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("calibration size n")
        ax.grid(alpha=0.3, which="both")
    axes[1].legend(fontsize=7)
    fig.suptitle(
        f"ExponQ's target level at alpha = {ALPHA:g}: paper scaling (dashed), tight analysis "
        "(dotted), shaped default (solid), automatic parameters",
        fontsize=10,
    )
    for output in outputs:
        output.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(output, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--output", type=Path, default=None, help="directory for the figure (default: both)"
    )
    args = parser.parse_args(argv)
    print_table()
    levels = run()
    directories = FIGURE_DIRS if args.output is None else (args.output,)
    outputs = [directory / "exponq_level.png" for directory in directories]
    try:
        plot(levels, outputs)
    except ImportError:
        print("matplotlib is not installed: no figure (pip install 'privconf-sklearn[plot]').")
    else:
        print("wrote " + ", ".join(str(path) for path in outputs))
    return levels


if __name__ == "__main__":
    main()
