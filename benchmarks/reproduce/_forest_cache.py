"""Reuse diffprivlib's random-forest tree skeletons across runs with a fixed seed.

diffprivlib's ``RandomForestClassifier`` draws each tree's split features and
thresholds from its random state alone, without looking at the data
(``_FittingTree.build``), then fills the leaves from the data. Building 127 trees of
depth 7 in pure Python takes about two thirds of a fit (1.9 s of 3 s here). Paper
002's code seeds every forest with ``random_state=42``, so every run builds exactly the
same skeletons from exactly the same random state.

:func:`reuse_tree_skeletons` memoises ``build`` on everything it depends on: the
random state's full internal state, ``max_depth``, ``n_features`` and the bounds. On a
hit it installs the stored nodes and advances the random state to where the original
build left it, so the fitted forest is bit-for-bit the one diffprivlib would have
fitted (checked by the tests); on any other configuration it is a cache miss and the
original code runs. If diffprivlib's internals change, the context manager does
nothing.
"""

from __future__ import annotations

import pickle
from contextlib import contextmanager

__all__ = ["reuse_tree_skeletons"]

#: Skeletons kept at most (one fixed-seed forest of 127 trees needs 127).
_MAX_ENTRIES = 4096


@contextmanager
def reuse_tree_skeletons():
    """Context manager memoising ``diffprivlib.models.forest._FittingTree.build``."""
    try:
        from diffprivlib.models import forest

        original = forest._FittingTree.build
    except (ImportError, AttributeError):
        yield
        return
    cache: dict = {}

    def build(self):
        state = self.random_state.get_state()
        key = (
            state[1].tobytes(),
            state[2],
            state[3],
            state[4],
            self.max_depth,
            self.n_features,
            pickle.dumps(self.bounds),
        )
        hit = cache.get(key)
        if hit is None:
            original(self)
            if len(cache) < _MAX_ENTRIES:
                cache[key] = (self.nodes, self.node_count, self.random_state.get_state())
            return self
        nodes, node_count, after = hit
        self.nodes, self.node_count = list(nodes), node_count
        self.random_state.set_state(after)
        return self

    forest._FittingTree.build = build
    try:
        yield
    finally:
        forest._FittingTree.build = original
