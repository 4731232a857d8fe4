"""Smallest calibration size at which each mechanism can return non-trivial sets.

For every mechanism, at epsilon in {0.5, 1, 2} and alpha in {0.05, 0.1}, the value of
``mechanism.min_informative_samples(alpha)``: the smallest ``n`` for which
``coverage_certificate(n, alpha).feasible``, computed from public quantities only
(below it a calibration can only release the top of the range: every label, intervals as
wide as the bounds). Federated mechanisms are per agent, with ``N_AGENTS`` agents of
equal size. "Before" uses the defaults before issue 12 (ExponQ ``scaling="paper"``,
DP-APS ``n_bins=20``, FedCP2-QQ ``n_bins=100``), "after" today's defaults. P-COQS is
stated at ``(epsilon, 1e-5)``-DP, a weaker guarantee than pure epsilon-DP.

    python benchmarks/min_informative_sizes.py                 # table + figure
    python benchmarks/min_informative_sizes.py --output DIR    # figure elsewhere

Prints a Markdown table and writes ``min_informative_sizes.png`` to
``benchmarks/figures/`` (the documentation build draws its own; needs matplotlib, the
``[plot]`` extra; without it only the table is printed). Takes a few seconds: every
entry is a bisection over public certificates, no data.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import numpy as np

from privconf_sklearn.mechanisms import (
    DPAPS,
    PCOQS,
    ExponQ,
    FedCP2QQ,
    FedCPQQ,
    QuantileMechanism,
    SplitConformal,
)

ROOT = Path(__file__).resolve().parents[1]
FIGURE_DIRS = (ROOT / "benchmarks" / "figures",)  # the docs build draws its own copy
EPSILONS = (0.5, 1.0, 2.0)
ALPHAS = (0.05, 0.1)
N_AGENTS = 10

Factory = Callable[[float], QuantileMechanism]

#: (name, before, after): mechanisms built from epsilon with the defaults before and
#: after issue 12. Federated names end in "per agent".
MECHANISMS: list[tuple[str, Factory, Factory]] = [
    ("SplitConformal (non-private)", lambda e: SplitConformal(), lambda e: SplitConformal()),
    ("ExponQ", lambda e: ExponQ(e, scaling="paper"), lambda e: ExponQ(e)),
    (
        "ExponQ monotone (add/remove)",
        lambda e: ExponQ(e, scaling="monotone"),
        lambda e: ExponQ(e, scaling="monotone"),
    ),
    (
        "P-COQS (eps, 1e-5)",
        lambda e: PCOQS(epsilon=e, delta=1e-5),
        lambda e: PCOQS(epsilon=e, delta=1e-5),
    ),
    (
        "P-COQS inflated (eps, 1e-5)",
        lambda e: PCOQS(epsilon=e, delta=1e-5, inflated=True),
        lambda e: PCOQS(epsilon=e, delta=1e-5, inflated=True),
    ),
    ("DP-APS", lambda e: DPAPS(e, n_bins=20), lambda e: DPAPS(e)),
    (
        "FedCP-QQ (non-private), per agent",
        lambda e: FedCPQQ(n_agents=N_AGENTS),
        lambda e: FedCPQQ(n_agents=N_AGENTS),
    ),
    (
        "FedCP2-QQ, per agent",
        lambda e: FedCP2QQ(e, n_bins=100, scaling="paper", n_agents=N_AGENTS),
        lambda e: FedCP2QQ(e, n_agents=N_AGENTS),
    ),
]


def run() -> list[dict]:
    """One row per (mechanism, epsilon, alpha) with the sizes before and after."""
    rows = []
    for name, before, after in MECHANISMS:
        for epsilon in EPSILONS:
            for alpha in ALPHAS:
                rows.append(
                    {
                        "mechanism": name,
                        "epsilon": epsilon,
                        "alpha": alpha,
                        "before": before(epsilon).min_informative_samples(alpha),
                        "after": after(epsilon).min_informative_samples(alpha),
                    }
                )
    return rows


def markdown_table(rows: list[dict]) -> str:
    """Mechanisms as rows, (alpha, epsilon) as columns, "before -> after" in the cells."""
    columns = [(alpha, epsilon) for alpha in ALPHAS for epsilon in EPSILONS]
    header = "| mechanism | " + " | ".join(f"a={a:g}, e={e:g}" for a, e in columns) + " |"
    lines = [header, "|---|" + "---:|" * len(columns)]
    for name, _, _ in MECHANISMS:
        cells = []
        for alpha, epsilon in columns:
            (row,) = (
                r
                for r in rows
                if r["mechanism"] == name and r["alpha"] == alpha and r["epsilon"] == epsilon
            )
            same = row["before"] == row["after"]
            cells.append(f"{row['after']:,}" if same else f"{row['before']:,} -> {row['after']:,}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], outputs: list[Path]) -> None:
    """Minimum size against epsilon, one panel per alpha; dashed before, solid after."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ALPHAS), figsize=(13, 4.4), constrained_layout=True)
    colors = plt.get_cmap("tab10")(np.arange(10))
    markers = "osD^v<>P"  # distinct markers: some curves coincide (e.g. P-COQS, split)
    for ax, alpha in zip(axes, ALPHAS, strict=True):
        for index, (name, _, _) in enumerate(MECHANISMS):
            part = [r for r in rows if r["mechanism"] == name and r["alpha"] == alpha]
            eps = [r["epsilon"] for r in part]
            after = [r["after"] for r in part]
            before = [r["before"] for r in part]
            color, marker = colors[index % len(colors)], markers[index % len(markers)]
            ax.plot(eps, after, "-", marker=marker, color=color, ms=6, mfc="none", label=name)
            if before != after:
                ax.plot(eps, before, "--", marker=marker, color=color, ms=4, alpha=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_ylabel("smallest n with non-trivial sets")
        ax.set_title(f"alpha = {alpha:g} (dashed: before issue 12)")
        ax.grid(alpha=0.3, which="both")
    axes[-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.suptitle(f"min_informative_samples (federated: per agent, {N_AGENTS} agents)", fontsize=10)
    for output in outputs:
        output.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(output, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--output", type=Path, default=None, help="directory for the figure (default: both)"
    )
    args = parser.parse_args(argv)
    rows = run()
    print(markdown_table(rows))
    directories = FIGURE_DIRS if args.output is None else (args.output,)
    outputs = [directory / "min_informative_sizes.png" for directory in directories]
    try:
        plot(rows, outputs)
    except ImportError:
        print("matplotlib is not installed: no figure (pip install 'privconf-sklearn[plot]').")
    else:
        print("wrote " + ", ".join(str(path) for path in outputs))
    return rows


if __name__ == "__main__":
    main()
