"""One-shot federated calibration: FedCP-QQ and FedCP2-QQ (Humbert et al. 2023).

Humbert, Le Bars, Bellet and Arlot, "One-Shot Federated Conformal Prediction" (ICML
2023). The mechanisms :class:`FedCPQQ` and :class:`FedCP2QQ` run, in one process, the
three parts that :mod:`privconf_sklearn.federated` sends over JSON to agents on other
machines:

- the server's plan, from public quantities only: :func:`make_plan` (ranks, bins,
  ``gamma`` and the coverage certificate) and the plan types; the agents' scalings and
  the rank corrections they need (:data:`AGENT_SCALINGS`, one :class:`AgentScaling`
  each);
- each agent's release from its own scores: :func:`agent_release` (and
  :func:`agent_log_probabilities`, its exact distribution, for audits);
- the server's aggregation: :func:`release_calibration`, with the privacy of the
  result (:func:`plan_privacy`).

The coverage table, the rank searches, the agents' rank corrections and the quadrature
behind the certificate are private modules of this package.
"""

from ._agent import AgentRelease, agent_log_probabilities, agent_release
from ._correction import SCALINGS as AGENT_SCALINGS
from ._correction import AgentScaling
from ._mechanisms import FedCP2QQ, FedCPQQ
from ._plan import (
    BIN_GRID,
    FEDCP2_QQ,
    FEDCP_QQ,
    GAMMA_GRID,
    MAX_AGENT_SIZE,
    MAX_AGENTS,
    MAX_BINS,
    MAX_SAMPLE_SIZE,
    FedCP2QQPlan,
    FedCPQQPlan,
    FederatedPlan,
    even_sizes,
    make_plan,
)
from ._server import plan_privacy, release_calibration

__all__ = [
    "AGENT_SCALINGS",
    "BIN_GRID",
    "FEDCP2_QQ",
    "FEDCP_QQ",
    "GAMMA_GRID",
    "MAX_AGENTS",
    "MAX_AGENT_SIZE",
    "MAX_BINS",
    "MAX_SAMPLE_SIZE",
    "AgentRelease",
    "AgentScaling",
    "FedCP2QQ",
    "FedCP2QQPlan",
    "FedCPQQ",
    "FedCPQQPlan",
    "FederatedPlan",
    "agent_log_probabilities",
    "agent_release",
    "even_sizes",
    "make_plan",
    "plan_privacy",
    "release_calibration",
]
