"""One-shot federated calibration (Humbert et al. 2023, FedCP-QQ and FedCP2-QQ) as a protocol.

A thin JSON transport over the public functions of
:mod:`privconf_sklearn.mechanisms.fedcp` (the same functions
:class:`~privconf_sklearn.mechanisms.FedCPQQ` and
:class:`~privconf_sklearn.mechanisms.FedCP2QQ` run in one process):

1. the server calls :func:`make_plan` on public quantities (agent sizes, ``alpha`` and,
   for the private protocol, ``epsilon``, bins, ``gamma``) and sends
   :func:`plan_to_dict` to every agent;
2. each agent calls :func:`agent_message` on its own scores (mapped to [0, 1]) with its
   own :class:`AgentLedger` and sends the returned dict back: the only data-dependent
   communication. Agents refuse by default: a non-private (FedCP-QQ) plan unless
   ``allow_non_private=True``, a round or plan already answered, a message beyond the
   ledger's budget;
3. the server calls :func:`aggregate` on the plan and the messages and gets a
   :class:`~privconf_sklearn.mechanisms.Calibration`.

Plans carry the protocol version, a round id (a fresh random nonce per round) and a
digest of their content; messages carry the version, the round id and the digest of the
plan they were made for. The server re-derives the plan
from its public inputs and refuses any plan or message that does not match.

See ``examples/federated_protocol.py`` for three agent processes and a server talking
over a socket on 127.0.0.1.
"""

from ..mechanisms.fedcp import (
    BIN_GRID,
    GAMMA_GRID,
    FedCP2QQPlan,
    FedCPQQPlan,
    FederatedPlan,
    even_sizes,
    make_plan,
    plan_privacy,
)
from ._ledger import AgentLedger, LedgerFileError
from ._protocol import agent_message, agent_message_log_probabilities, aggregate
from ._wire import PROTOCOL_VERSION, plan_digest, plan_from_dict, plan_to_dict, verified_plan

__all__ = [
    "BIN_GRID",
    "GAMMA_GRID",
    "PROTOCOL_VERSION",
    "AgentLedger",
    "FedCP2QQPlan",
    "FedCPQQPlan",
    "FederatedPlan",
    "LedgerFileError",
    "agent_message",
    "agent_message_log_probabilities",
    "aggregate",
    "even_sizes",
    "make_plan",
    "plan_digest",
    "plan_from_dict",
    "plan_privacy",
    "plan_to_dict",
    "verified_plan",
]
