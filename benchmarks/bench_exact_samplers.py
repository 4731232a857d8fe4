"""Speed of the exact samplers against the floating-point samplers they replace.

- **Exponential mechanism**, ``m`` candidates with integer penalties (ExponQ's shape:
  ``max((N - k) b_j, k a_j)`` on Beta(2, 5) bin counts, ``N = 2**30``):
  ``NoiseSource.exponential_mechanism`` (inverse CDF with lazily refined precision,
  validation included) against the removed 53-bit draw (``cumsum(exp(lw - max(lw)))``,
  one uniform, ``searchsorted``) on the same float log-weights.
- **Shaped exponential mechanism** (ExponQ's default): the candidates, slope and target
  of the automatic shape at ``n`` Beta(2, 5) scores, ``epsilon = 1``:
  :func:`~privconf_sklearn.mechanisms._shaped.sample_shaped` against the 53-bit draw on
  the same float log-weights ``-epsilon a_j / D``.
- **Discrete Laplace**, ``B`` draws (Canonne, Kamath and Steinke 2020, Algorithm 2):
  ``NoiseSource.discrete_laplace`` at the scale of DP-APS's counts ``B / epsilon`` for a
  dyadic ``epsilon = 1`` and a non-dyadic ``epsilon = 0.1`` (whose exact scale has a
  58-bit denominator), against the inverse-CDF continuous Laplace it replaces
  (``NoiseSource.laplace``).
- **Sparse vector release** (DP-APS's default): the first of ``B - 1`` cumulative counts
  (``10 B`` Beta(2, 5) scores) whose noisy value reaches the 0.9 quantile's rank, with
  query noise at the exact scale ``1 / epsilon_2`` (``epsilon = 1`` and the non-dyadic
  ``0.7``, threshold share 2/5): ``NoiseSource.discrete_laplace_first_crossing`` (only
  the crossing events, in order, up to the first) against drawing every noise with the
  exact discrete Laplace sampler and comparing (the release before it).

Both pairs alternate (baseline, exact, baseline, exact, ...; ``benchmarks/_timing.py``),
with the production noise source (``os.urandom``); the ratio is the median of the
per-round ratios with their min-max.

Run:  python -m benchmarks.bench_exact_samplers [--quick] [--rounds R] [--only GROUP ...]
"""

from __future__ import annotations

import argparse
from fractions import Fraction

import numpy as np

from benchmarks._timing import alternate, load_average
from privconf_sklearn._random import check_noise_source
from privconf_sklearn.mechanisms._shaped import (
    choose_shape,
    miss_curve,
    sample_shaped,
    shaped_penalties,
)
from privconf_sklearn.mechanisms._sparse_vector import noise_rates
from privconf_sklearn.mechanisms.expon_q import bin_counts, quantile_penalties


def _old_draw(log_weights: np.ndarray, noise) -> int:
    """The removed sampler: one 53-bit uniform, float64 cumulative weights."""
    cdf = np.cumsum(np.exp(log_weights - np.max(log_weights)))
    index = int(np.searchsorted(cdf, noise.uniform(1)[0] * cdf[-1], side="right"))
    return min(index, log_weights.shape[0] - 1)


def exponential_rows(sizes, rounds):
    noise = check_noise_source(None)
    scores = np.random.default_rng(0).beta(2.0, 5.0, size=100_000)
    rows = []
    for m in sizes:
        penalties, denominator = quantile_penalties(bin_counts(scores, m), 0.9, "tight")
        log_weights = -(penalties / denominator)  # epsilon = 1
        timing = alternate(
            {
                "53-bit draw": lambda lw=log_weights: _old_draw(lw, noise),
                "exact": lambda p=penalties, d=denominator: noise.exponential_mechanism(p, d, 1.0),
            },
            rounds,
        )
        rows.append((f"exponential mechanism, m = {m:,}", timing, "53-bit draw"))
        print(f"  m = {m:,} done ({load_average()})", flush=True)
    return rows


def shaped_rows(sizes, rounds):
    noise = check_noise_source(None)
    rows = []
    for n in sizes:
        scores = np.random.default_rng(0).beta(2.0, 5.0, size=n)
        shape = choose_shape(n, 0.1, 1.0)
        numerators, denominator = shaped_penalties(
            miss_curve(bin_counts(scores, shape.n_bins)), shape
        )
        log_weights = -(numerators / denominator)  # epsilon = 1
        timing = alternate(
            {
                "53-bit draw": lambda lw=log_weights: _old_draw(lw, noise),
                "exact": lambda a=numerators, d=denominator: sample_shaped(a, d, 1.0, noise),
            },
            rounds,
        )
        rows.append((f"shaped, n = {n:,} (m = {shape.n_bins:,})", timing, "53-bit draw"))
        print(f"  shaped n = {n:,} done ({load_average()})", flush=True)
    return rows


def _every_noise_release(noise, scale, counts, level) -> int:
    """The previous exact release: all ``B - 1`` noises drawn, then the first crossing."""
    reached = counts[:-1] + noise.discrete_laplace(scale, counts.shape[0] - 1) >= level
    return int(np.argmax(reached)) if reached.any() else counts.shape[0] - 1


def sparse_vector_rows(sizes, rounds):
    noise = check_noise_source(None)
    rows = []
    for size in sizes:
        scores = np.random.default_rng(0).beta(2.0, 5.0, size=10 * size)
        counts = np.cumsum(bin_counts(scores, size))
        level = int(np.ceil(0.9 * (scores.size + 1)))  # crosses near the 0.9 quantile
        for epsilon in (1.0, 0.7):
            _, rate = noise_rates(epsilon, Fraction(2, 5))
            timing = alternate(
                {
                    "every noise": lambda b=1 / rate, c=counts, t=level: _every_noise_release(
                        noise, b, c, t
                    ),
                    "exact": lambda b=1 / rate, c=counts, t=level: (
                        noise.discrete_laplace_first_crossing(b, c[:-1], t)
                    ),
                },
                rounds,
            )
            label = f"sparse vector release, B = {size:,}, epsilon {epsilon:g}"
            rows.append((label, timing, "every noise"))
        print(f"  sparse vector B = {size:,} done ({load_average()})", flush=True)
    return rows


def laplace_rows(sizes, rounds):
    noise = check_noise_source(None)
    rows = []
    for size in sizes:
        for epsilon in (1.0, 0.1):
            scale = Fraction(size) / Fraction(epsilon)
            timing = alternate(
                {
                    "continuous": lambda b=float(scale), s=size: noise.laplace(b, s),
                    "exact": lambda b=scale, s=size: noise.discrete_laplace(b, s),
                },
                rounds,
            )
            label = f"discrete Laplace, B = {size:,}, scale B / {epsilon:g}"
            rows.append((label, timing, "continuous"))
        print(f"  B = {size:,} done ({load_average()})", flush=True)
    return rows


GROUPS = {
    "exponential": exponential_rows,
    "shaped": shaped_rows,
    "laplace": laplace_rows,
    "sparse_vector": sparse_vector_rows,
}


def report(rows):
    print("| sampler | baseline (ms, median) | exact (ms, median) | ratio: median (min-max) |")
    print("|---|---|---|---|")
    for label, timing, baseline in rows:
        print(
            f"| {label} | {timing.median(baseline) * 1e3:.3f} | {timing.median('exact') * 1e3:.3f} "
            f"| {timing.ratio_text('exact', baseline)} |"
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument(
        "--only", nargs="+", choices=sorted(GROUPS), default=sorted(GROUPS), help="some groups"
    )
    args = parser.parse_args(argv)
    sizes = [10**3, 10**4] if args.quick else [10**3, 10**4, 10**5, 10**6]
    print(load_average())
    rows = []
    for name in ("exponential", "shaped", "laplace", "sparse_vector"):
        if name in args.only:
            group_sizes = [2400, *sizes[1:]] if name == "shaped" else sizes
            rows += GROUPS[name](group_sizes, args.rounds)
    print(f"\n{load_average()}\n")
    report(rows)


if __name__ == "__main__":
    main()
