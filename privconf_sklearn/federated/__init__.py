"""One-shot federated calibration (paper 004, FedCP-QQ and FedCP2-QQ) as a protocol.

Three pure functions with JSON-serialisable inputs and outputs, so that the same code
runs inside :class:`~privconf_sklearn.mechanisms.FedCPQQ` /
:class:`~privconf_sklearn.mechanisms.FedCP2QQ` and across real machines:

1. the server calls :func:`make_plan` on public quantities (agent sizes, ``alpha``,
   ``epsilon``, bins) and sends ``plan.to_dict()`` to every agent;
2. each agent calls :func:`agent_message` on its own scores (mapped to [0, 1]) and
   sends the returned dict back: the only data-dependent communication;
3. the server calls :func:`aggregate` on the plan and the messages and gets a
   :class:`~privconf_sklearn.mechanisms.Calibration` (threshold and guarantees).

See ``examples/federated_protocol.py`` for three agent processes and a server talking
over a socket on 127.0.0.1.
"""

from ..mechanisms._fedcp_agent import agent_message, agent_message_log_probabilities
from ..mechanisms._fedcp_plan import (
    GAMMA_GRID,
    PROTOCOL_VERSION,
    FederatedPlan,
    even_sizes,
    make_plan,
)
from ..mechanisms._fedcp_server import aggregate, plan_privacy

__all__ = [
    "GAMMA_GRID",
    "PROTOCOL_VERSION",
    "FederatedPlan",
    "agent_message",
    "agent_message_log_probabilities",
    "aggregate",
    "even_sizes",
    "make_plan",
    "plan_privacy",
]
