"""P-COQS's binary search gives the same release as counting every query from scratch.

The search counts ``#{s <= mid}`` from a shrinking set of scores, and on [0, 1] with many
scores from a dyadic histogram first; the reference here counts each query with one
comparison over all scores. Same noise, same scores -> same threshold, bit for bit.
"""

import math

import numpy as np
import pytest

from privconf_sklearn._random import NoiseSource  # to record the noise drawn
from privconf_sklearn.mechanisms import PCOQS
from privconf_sklearn.mechanisms.pcoqs import noisy_binary_search


def reference_search(scores, target, lower, upper, noise_values):
    """Algorithm 1 of Romanus and Molinari (2025) with each count computed directly."""
    left, right, certified = lower, upper, False
    for noise_value in noise_values:
        middle = 0.5 * (left + right)
        count = int(np.count_nonzero(scores <= middle))
        if count + noise_value >= target:
            right, certified = middle, True
        else:
            left = middle
    return (right if certified else 1.0), certified


def adversarial_scores(n, rng):
    """Dyadic midpoints and their neighbours, 0, 1, subnormals, ties, and uniforms."""
    depth = rng.integers(1, 40, size=n // 4)
    dyadic = rng.integers(0, 2**20, size=n // 4) / 2**20
    dyadic = np.floor(dyadic * 2.0**depth) / 2.0**depth
    neighbours = np.r_[np.nextafter(dyadic[: n // 8], 0.0), np.nextafter(dyadic[: n // 8], 1.0)]
    special = np.array([0.0, 5e-324, 2.2250738585072014e-308, 1.0, np.nextafter(1.0, 0.0)])
    ties = np.full(n // 8, rng.uniform())
    rest = rng.uniform(size=n - dyadic.size - neighbours.size - special.size - ties.size)
    scores = np.clip(np.r_[dyadic, neighbours, special, ties, rest], 0.0, 1.0)
    rng.shuffle(scores)
    return scores


@pytest.mark.parametrize("n", [50, 3000, 2**17, 300_001])
@pytest.mark.parametrize("bounds", [(0.0, 1.0), (0.25, 0.875), (0.0, 0.6)])
def test_same_release_as_counting_every_query(n, bounds):
    rng = np.random.default_rng(n)
    scores = adversarial_scores(n, rng)
    lower, upper = bounds
    for trial in range(12):
        n_queries = int(rng.integers(1, 53))
        target = float(rng.uniform(0, n + 1))
        # Noise from none to much larger than n, so that the paths wander everywhere.
        scale = [0.0, 1.0, math.sqrt(n), n / 4][trial % 4]
        noise = rng.normal(0.0, scale, size=n_queries) if scale else np.zeros(n_queries)
        expected = reference_search(scores, target, lower, upper, noise)
        assert noisy_binary_search(scores, target, lower, upper, noise) == expected


class RecordingNoise(NoiseSource):
    """Records the Gaussian draws of a calibration (no public route exposes them)."""

    def __init__(self, seed):
        super().__init__(np.random.default_rng(seed))
        self.normals = []

    def normal(self, scale, size=1):
        values = super().normal(scale, size)
        self.normals.append(np.array(values))
        return values


def test_calibrate_releases_the_reference_threshold():
    """Through the mechanism: its release is the reference search on its own noise."""
    scores = adversarial_scores(2**18, np.random.default_rng(7))
    for seed in range(4):
        noise = RecordingNoise(seed)
        calibration = PCOQS(rho=0.5).calibrate(scores, 0.1, random_state=noise)
        (values,) = noise.normals
        expected = reference_search(scores, calibration.details["target_rank"], 0.0, 1.0, values)
        assert (calibration.threshold, calibration.details["certified"]) == expected
