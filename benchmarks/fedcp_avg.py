"""FedCP-Avg (Lu and Kalpathy-Cramer 2021): the federated baseline of paper 004.

Paper 004 Sec. 5: each agent computes its local split-conformal quantile, of order
``ceil((n_j + 1)(1 - alpha)) / n_j`` (the ``ceil((n_j + 1)(1 - alpha))``-th smallest
score, ``+inf`` if that exceeds ``n_j``), and the server averages them. It has no
coverage guarantee and is not robust to outliers; it is kept here as a benchmark and
reproduction baseline only, not in the library's public API.
"""

from __future__ import annotations

import numpy as np

from privconf_sklearn._validation import split_conformal_rank

__all__ = ["fedcp_avg_threshold"]


def fedcp_avg_threshold(agent_scores, alpha: float) -> float:
    """Average of the agents' local conformal quantiles.

    Parameters
    ----------
    agent_scores : sequence of array-like
        One array of conformity scores per agent (any units).
    alpha : float
        Miscoverage level.

    Returns
    -------
    float
        The averaged threshold (``inf`` if an agent's rank exceeds its size).
    """
    quantiles = []
    for scores in agent_scores:
        scores = np.asarray(scores, dtype=np.float64)
        rank = split_conformal_rank(scores.shape[0], alpha)
        quantiles.append(
            np.inf if rank > scores.shape[0] else np.partition(scores, rank - 1)[rank - 1]
        )
    return float(np.mean(quantiles))
