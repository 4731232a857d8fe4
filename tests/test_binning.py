"""bin_counts: blocked, gather-free binning equals the edge-table binning exactly.

The oracle is the previous implementation (one pass per step over full-size arrays and
two gathers into the table ``np.arange(m + 1) / m``); the definition is the smallest
``j >= 1`` with ``s <= fl(j / m)``, read off the same table with ``searchsorted``.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privconf_sklearn.mechanisms._binning import MAX_BINS  # the bound has no public route
from privconf_sklearn.mechanisms.expon_q import bin_counts


def table_binning(scores, m):
    """The implementation bin_counts replaced: the oracle of these tests."""
    edges = np.arange(m + 1, dtype=np.float64) / m
    index = np.ceil(scores * m).astype(np.int64)
    np.clip(index, 1, m, out=index)
    index -= (index > 1) & (scores <= edges[index - 1])
    index += scores > edges[index]
    return np.bincount(index, minlength=m + 1)[1:]


def definition(scores, m):
    """Counts of the smallest j >= 1 with s <= fl(j / m)."""
    edges = np.arange(m + 1, dtype=np.float64) / m
    index = np.maximum(np.searchsorted(edges, scores, side="left"), 1)
    return np.bincount(index, minlength=m + 1)[1:]


def adversarial_scores(m, rng, n_edges=2000):
    """Edges fl(j / m), one and two ulps either side, 0, 1, subnormals, and uniforms."""
    j = np.unique(np.r_[0, 1, 2, m - 1, m, rng.integers(0, m + 1, size=n_edges)])
    j = j[(j >= 0) & (j <= m)]
    edges = j / m
    near = [edges]
    for direction in (-1.0, 2.0):
        step = np.nextafter(edges, direction)
        near += [step, np.nextafter(step, direction)]
    special = [
        0.0,
        -0.0,
        5e-324,
        1e-320,
        2.2250738585072014e-308,
        1e-300,
        1.0,
        np.nextafter(1.0, 0.0),
        0.5,
        np.nextafter(0.5, 0),
        np.nextafter(0.5, 1),
    ]
    scores = np.concatenate([*near, special, rng.uniform(size=3000)])
    return np.clip(scores, 0.0, 1.0)


#: The largest grids build edge tables of millions of entries: over the fast tests' budget.
SIZES = [1, 2, 3, 7, 10, 20, 97, 100, 997, 1000, 4096, 2**16, 10**5 + 3, 10**6]
SIZES += [pytest.param(m, marks=pytest.mark.slow) for m in (2**24 - 1, MAX_BINS)]


@pytest.mark.parametrize("m", SIZES)
def test_same_bins_as_the_edge_table_on_adversarial_scores(m):
    rng = np.random.default_rng(m % 1000)
    scores = adversarial_scores(m, rng)
    counts = bin_counts(scores, m)
    assert np.array_equal(counts, table_binning(scores, m))
    assert np.array_equal(counts, definition(scores, m))
    assert counts.dtype == np.int64 and counts.shape == (m,)


@pytest.mark.parametrize("m", [5, 1000, 2**16, 2**17])
def test_same_bins_across_block_and_chunk_boundaries(m):
    """More scores than one block (2**16) and than one chunk (2 (m + 1) or a block)."""
    rng = np.random.default_rng(1)
    edges = rng.integers(0, m + 1, size=200_000) / m
    scores = np.clip(np.r_[edges, np.nextafter(edges, 2.0), rng.uniform(size=300_001)], 0, 1)
    rng.shuffle(scores)
    assert np.array_equal(bin_counts(scores, m), table_binning(scores, m))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 10**6),
    st.lists(st.floats(0.0, 1.0, allow_subnormal=True), min_size=1, max_size=50),
    st.lists(st.integers(0, 10**6), max_size=20),
)
def test_property_same_bins_as_the_definition(m, values, numerators):
    on_edges = np.array([k % (m + 1) for k in numerators], dtype=np.float64) / m
    scores = np.r_[np.array(values), on_edges, np.nextafter(on_edges, 2.0).clip(0, 1)]
    counts = bin_counts(scores, m)
    assert np.array_equal(counts, definition(scores, m))
    assert np.array_equal(counts, table_binning(scores, m))


def test_empty_scores_and_bad_sizes():
    assert bin_counts(np.array([]), 3).tolist() == [0, 0, 0]
    for bad in (0, -1, MAX_BINS + 1):
        with pytest.raises(ValueError, match="n_bins must be an integer in"):
            bin_counts(np.array([0.5]), bad)
