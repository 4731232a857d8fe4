"""
Federated protocol over a socket
================================

Three agents and a server run one-shot federated calibration over a local socket.

Humbert et al. (2023): FedCP2-QQ by default, FedCP-QQ with ``--non-private``. Every
agent is a separate process holding its own calibration rows; the server never sees a
score.

1. Each agent connects to the server on 127.0.0.1 and announces its (public) number
   of calibration rows.
2. The server makes the plan from public quantities only
   (:func:`privconf_sklearn.federated.make_plan`) and opens a round: it sends the plan
   as JSON (:func:`privconf_sklearn.federated.plan_to_dict`: with the protocol version,
   a fresh random round id and a digest of the content).
3. Each agent keeps its own privacy ledger in a JSON file
   (:class:`privconf_sklearn.federated.AgentLedger`, total budget ``--budget``), checks
   the plan cheaply (format, digest, its own size), reserves the message's epsilon on
   its ledger (refusing a round or plan already answered, or a message beyond the
   budget), computes its conformity scores with the public model, runs
   :func:`privconf_sklearn.federated.agent_message` (epsilon-DP in its rows, noise from
   the operating system's cryptographic source) and sends the message, bound to the
   round and the plan: the only data-dependent communication. A non-private plan is
   answered only with ``--non-private`` (``allow_non_private=True``).
4. The server calls :func:`privconf_sklearn.federated.aggregate`, which re-derives the
   plan from its public inputs and refuses any plan or message that does not match
   (another plan, another round, a duplicate), and prints the threshold and its
   guarantees, then the coverage of the resulting prediction sets on public test data.
   Then the server tries two more rounds: the same plan under a new round id, and a
   non-private (FedCP-QQ) plan. Every agent refuses both: its ledger has answered the
   first, and it sends no exact score unless its owner allows it.

The model is "public": every process fits the same logistic regression on the same
public training rows. Scores are LAC scores ``1 - p_y``, already in [0, 1].

Run: ``python examples/federated_protocol.py`` (options ``--sizes 400 600 800``,
``--epsilon 2``, ``--budget 3``, ``--n-bins auto``, ``--alpha 0.1``, ``--non-private``,
``--ledger-dir DIR``: where the agents' ledger files go, a temporary directory by
default). The defaults are small so that the run takes a few seconds. The
documentation shows this script without running it (it starts processes and a server);
``tests/test_federated_protocol.py`` runs it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import tempfile
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegression

from privconf_sklearn.datasets import make_two_gaussians
from privconf_sklearn.federated import (
    AgentLedger,
    FedCP2QQPlan,
    agent_message,
    aggregate,
    make_plan,
    plan_to_dict,
)

HOST = "127.0.0.1"
TIMEOUT_SECONDS = 60.0


def public_model() -> LogisticRegression:
    """The model every party holds: fitted on public rows (simulation seed 0)."""
    X, y = make_two_gaussians(2000, random_state=0)
    return LogisticRegression().fit(X, y)


def lac_scores(model, X, y) -> np.ndarray:
    """LAC conformity scores ``1 - p_y`` in [0, 1]."""
    probabilities = model.predict_proba(X)
    return 1.0 - probabilities[np.arange(y.shape[0]), y]


def send(connection: socket.socket, payload: dict) -> None:
    connection.sendall((json.dumps(payload) + "\n").encode())


def receive(stream) -> dict:
    line = stream.readline()
    if not line:
        raise ConnectionError("The other side closed the connection.")
    return json.loads(line)


def run_agent(agent: int, n_rows: int, port: int, options: dict) -> None:
    """One agent: private rows (simulation seed 100 + agent), one message per round.

    Its ledger file (budget ``options["budget"]``) survives the process; the agent
    refuses a malformed plan, a plan made for another size than its own, a non-private
    plan unless allowed, a round or plan already answered, or a message beyond its
    budget, and says why instead of sending a message.
    """
    X, y = make_two_gaussians(n_rows, random_state=100 + agent)
    scores = lac_scores(public_model(), X, y)
    path = Path(options["ledger_dir"]) / f"agent-{agent}.json"
    ledger = AgentLedger(options["budget"], path=path)
    with socket.create_connection((HOST, port), timeout=TIMEOUT_SECONDS) as connection:
        stream = connection.makefile("r")
        send(connection, {"type": "hello", "agent": agent, "n_samples": int(scores.shape[0])})
        for _ in range(options["rounds"]):
            plan = receive(stream)["plan"]
            if not plan["feasible"]:
                send(connection, {"type": "no-message", "agent": agent})
                continue
            try:
                # random_state=None: noise from the operating system's cryptographic source.
                message = agent_message(
                    scores, plan, agent, ledger=ledger, allow_non_private=options["non_private"]
                )
            except ValueError as refusal:
                send(connection, {"type": "refusal", "agent": agent, "reason": str(refusal)})
                continue
            send(connection, {"type": "message", "message": message})


def describe(plan) -> str:
    """One line about the plan (public quantities only)."""
    if not plan.feasible:
        return f"{plan.protocol} infeasible ({plan.reason})"
    if isinstance(plan, FedCP2QQPlan):
        return (
            f"{plan.protocol}, ranks {list(plan.table_ranks)} raised by "
            f"{list(plan.rank_corrections)}, server rank {plan.server_rank}, gamma "
            f"{plan.gamma}, {plan.n_bins} bins"
        )
    return f"{plan.protocol}, local ranks {list(plan.local_ranks)}, server rank {plan.server_rank}"


def accept_agents(listener: socket.socket, n_agents: int) -> dict:
    """Every agent's connection, stream and announced size, by agent index."""
    connections = {}
    for _ in range(n_agents):
        connection, _ = listener.accept()
        connection.settimeout(TIMEOUT_SECONDS)
        stream = connection.makefile("r")
        hello = receive(stream)
        connections[hello["agent"]] = (connection, stream, hello["n_samples"])
    return connections


def one_round(connections: dict, wire: dict) -> list[dict]:
    """The plan of one round out, the agents' replies in."""
    for connection, _, _ in connections.values():
        send(connection, {"type": "plan", "plan": wire})
    return [receive(stream) for _, stream, _ in connections.values()]


def serve(listener: socket.socket, n_agents: int, alpha, epsilon, n_bins):
    """Hellos in; round 1 (answered); the same plan again and a non-private plan (refused)."""
    connections = accept_agents(listener, n_agents)
    try:
        announced = [connections[j][2] for j in range(n_agents)]
        plan = make_plan(announced, alpha, epsilon=epsilon, n_bins=n_bins)
        print(f"server: agents announced sizes {announced}; plan: {describe(plan)}")
        wire = plan_to_dict(plan)  # a fresh round id
        replies = one_round(connections, wire)
        again = one_round(connections, plan_to_dict(plan))  # same plan, new round id
        exact = plan_to_dict(make_plan(announced, alpha))  # FedCP-QQ: exact scores
        again += one_round(connections, exact)
    finally:
        for connection, stream, _ in connections.values():
            stream.close()
            connection.close()
    for reply in sorted(replies + again, key=lambda reply: reply.get("agent", -1)):
        if reply["type"] == "refusal":
            print(f"server: agent {reply['agent']} refused: {reply['reason'].split(':')[0]}")
    return wire, [reply["message"] for reply in replies if reply["type"] == "message"]


def run_server(sizes, alpha, epsilon, n_bins, agent_options) -> None:
    """The server: plan, two rounds, release, evaluation on public data."""
    # Separate agent processes (forked where available: no re-import, fast start).
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with socket.create_server((HOST, 0)) as listener:
        listener.settimeout(TIMEOUT_SECONDS)
        port = listener.getsockname()[1]
        agents = [
            context.Process(target=run_agent, args=(j, n, port, agent_options))
            for j, n in enumerate(sizes)
        ]
        for process in agents:
            process.start()
        try:
            wire, messages = serve(listener, len(sizes), alpha, epsilon, n_bins)
        finally:
            for process in agents:
                process.join(timeout=TIMEOUT_SECONDS)
    if not messages:
        print("server: no messages (infeasible plan or every agent refused)")
        return
    for message in sorted(messages, key=lambda m: m["agent"]):
        print(f"server: agent {message['agent']} sent {message['value']:.4f}")
    calibration = aggregate(wire, messages)
    privacy = calibration.privacy
    print(
        f"server: threshold {calibration.threshold:.4f}, coverage >= "
        f"{calibration.coverage_lower_bound:.4f}, privacy {privacy.notion} "
        f"epsilon = {privacy.epsilon:g} per agent (the server's view: {privacy.epsilon:g} "
        f"under add/remove, {privacy.under('replace-one').epsilon:g} under replace-one)"
    )
    X_test, y_test = make_two_gaussians(5000, random_state=999)
    probabilities = public_model().predict_proba(X_test)
    sets = 1.0 - probabilities <= calibration.threshold
    coverage = sets[np.arange(y_test.shape[0]), y_test].mean()
    print(f"test: coverage {coverage:.4f}, mean set size {sets.sum(axis=1).mean():.3f}")
    folder = Path(agent_options["ledger_dir"])
    budget = agent_options["budget"]
    spent = [AgentLedger(budget, path=folder / f"agent-{j}.json").spent for j in range(len(sizes))]
    print(f"ledgers: spent {spent} of {budget:g} each (read back from the agents' files)")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Federated protocol over a socket.")
    parser.add_argument("--sizes", type=int, nargs="+", default=[400, 600, 800])
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--epsilon", type=float, default=2.0)
    parser.add_argument("--budget", type=float, default=3.0, help="each agent's total epsilon")
    parser.add_argument("--ledger-dir", default=None, help="agents' ledger files (default: temp)")
    parser.add_argument("--n-bins", default="auto", help='number of bins, or "auto"')
    parser.add_argument("--non-private", action="store_true", help="run FedCP-QQ")
    args = parser.parse_args(argv)
    epsilon = None if args.non_private else args.epsilon
    n_bins = args.n_bins if args.n_bins == "auto" else int(args.n_bins)
    with tempfile.TemporaryDirectory() as temporary:
        options = {
            "budget": args.budget,
            "ledger_dir": args.ledger_dir or temporary,
            "non_private": args.non_private,
            "rounds": 3,
        }
        run_server(args.sizes, args.alpha, epsilon, n_bins, options)


if __name__ == "__main__":
    main()
