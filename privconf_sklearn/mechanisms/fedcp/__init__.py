"""One-shot federated calibration: FedCP-QQ and FedCP2-QQ (Humbert et al. 2023).

Humbert, Le Bars, Bellet and Arlot, "One-Shot Federated Conformal Prediction" (ICML
2023). :class:`FedCPQQ` and :class:`FedCP2QQ` run in one process the three parts that
:mod:`privconf_sklearn.federated` sends over JSON to agents on other machines: the
server's plan from public quantities (:func:`make_plan`, the plan types, the agents'
:data:`AGENT_SCALINGS`), each agent's release (:func:`agent_release`,
:func:`agent_log_probabilities`) and the server's aggregation
(:func:`release_calibration`, :func:`plan_privacy`).
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
