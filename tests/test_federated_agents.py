"""Federated agents refuse by default: non-private plans, spent budgets, answered rounds.

Issue 24's attacks through the public API: a server-edited FedCP-QQ plan asking for one
exact score, the same plan 200 times, a message replayed into another round; and the
agent's ledger, in memory and in a file (atomic, reloaded, never silently reset).
"""

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from unittest import mock

import numpy as np
import pytest

from privconf_sklearn.federated import (
    AgentLedger,
    LedgerFileError,
    agent_message,
    aggregate,
    make_plan,
    plan_digest,
    plan_to_dict,
)

ALPHA = 0.1
SIZES = (100, 100, 100)


def parts_of(sizes=SIZES, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(size=n) for n in sizes]


def with_digest(wire, **edits):
    """A plan dict edited by a server that recomputes the digest (it is not a signature)."""
    from privconf_sklearn.federated import FedCP2QQPlan, FedCPQQPlan

    data = dict(wire, **edits)
    fields = {
        k: tuple(v) if isinstance(v, list) else v
        for k, v in data.items()
        if k not in ("protocol", "version", "round", "digest")
    }
    cls = FedCP2QQPlan if data["protocol"] == "FedCP2-QQ" else FedCPQQPlan
    return plan_to_dict(cls(**fields), round_id=data["round"])


# ------------------------------------------------------------ non-private plans
def test_a_non_private_plan_is_refused_by_default():
    wire = plan_to_dict(make_plan(SIZES, ALPHA))
    ledger = AgentLedger(1.0)
    with pytest.raises(ValueError, match=r"sends an exact score of this agent.*allow_non_private"):
        agent_message(parts_of()[0], wire, 0, ledger=ledger)
    for not_a_bool in ("yes", 1, None, np.bool_(True)):
        with pytest.raises(TypeError, match="allow_non_private must be True or False"):
            agent_message(parts_of()[0], wire, 0, ledger=ledger, allow_non_private=not_a_bool)
    assert ledger.answers == ()


def test_an_allowed_non_private_message_is_recorded_and_ends_the_budget():
    """The owner's explicit allow_non_private=True: the exact score is sent, recorded as
    non-private (spent = inf), and no private message follows on the same rows."""
    parts = parts_of()
    wire = plan_to_dict(make_plan(SIZES, ALPHA))
    ledger = AgentLedger(5.0)
    message = agent_message(parts[0], wire, 0, ledger=ledger, allow_non_private=True)
    assert message["value"] in parts[0]  # an exact score
    assert ledger.spent == float("inf") and ledger.remaining == 0.0
    assert ledger.answers[0]["epsilon"] is None
    private = plan_to_dict(make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20))
    with pytest.raises(ValueError, match="records a non-private message"):
        agent_message(parts[0], private, 0, ledger=ledger)


def test_issue_24_a_server_edited_plan_asking_for_one_exact_score_is_refused():
    """sample_sizes=(1, 1, 1), local_ranks=(1, 1, 1), digest recomputed: refused by
    default (non-private), and refused when non-private is allowed (the agent re-derives
    a FedCP-QQ plan). Nothing is recorded, no score is sent."""
    wire = plan_to_dict(make_plan(SIZES, ALPHA))
    edited = with_digest(wire, sample_sizes=[1, 1, 1], local_ranks=[1, 1, 1], server_rank=1)
    ledger = AgentLedger(1.0)
    with pytest.raises(ValueError, match="sends an exact score"):
        agent_message(parts_of()[0], edited, 0, ledger=ledger)
    with pytest.raises(ValueError, match="does not follow from its public inputs"):
        agent_message(parts_of()[0], edited, 0, ledger=ledger, allow_non_private=True)
    assert ledger.answers == ()


# -------------------------------------------------------------- the same plan
def test_issue_24_the_same_plan_200_times_is_answered_once():
    """The same round 200 times, then the same plan under 200 fresh round ids: one
    answer; the ledger has spent one epsilon."""
    plan = make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20)
    wire = plan_to_dict(plan)
    ledger = AgentLedger(1000.0)
    scores = parts_of()[0]
    agent_message(scores, wire, 0, ledger=ledger, random_state=0)
    for _ in range(200):
        with pytest.raises(ValueError, match="already answered round"):
            agent_message(scores, wire, 0, ledger=ledger)
    for _ in range(200):
        with pytest.raises(ValueError, match="already answered this plan"):
            agent_message(scores, plan_to_dict(plan), 0, ledger=ledger)
    assert len(ledger.answers) == 1 and ledger.spent == 1.0


def test_messages_compose_until_the_budget_is_spent_exactly():
    """Distinct plans of epsilon 0.5 against a budget of 2: four answers (the exact sum
    reaches 2), the fifth is refused before any score is read."""
    ledger = AgentLedger(2.0)
    sizes = (400, 400, 400)
    scores = parts_of(sizes)[0]
    answered = 0
    for alpha in (0.1, 0.11, 0.12, 0.13):
        wire = plan_to_dict(make_plan(sizes, alpha, epsilon=0.5, n_bins=20, gamma=0.5))
        agent_message(scores, wire, 0, ledger=ledger, random_state=0)
        answered += 1
    assert answered == 4 and ledger.spent == 2.0 and ledger.remaining == 0.0
    fifth = plan_to_dict(make_plan(sizes, 0.14, epsilon=0.5, n_bins=20, gamma=0.5))
    with pytest.raises(ValueError, match=r"costs epsilon = 0\.5; this agent has spent 2 of"):
        agent_message(scores + 5.0, fifth, 0, ledger=ledger)  # out-of-range scores unread
    assert len(ledger.answers) == 4


def test_the_budget_is_reserved_before_any_score_is_read():
    """A refused budget wins over bad scores (they are never read); scores refused after
    the reservation still count (the reservation came first)."""
    wire = plan_to_dict(make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20))
    bad = parts_of()[0] + 5.0
    with pytest.raises(ValueError, match="costs epsilon = 1"):
        agent_message(bad, wire, 0, ledger=AgentLedger(0.5))
    ledger = AgentLedger(3.0)
    with pytest.raises(ValueError, match=r"public range \[0, 1\]"):
        agent_message(bad, wire, 0, ledger=ledger)
    assert ledger.spent == 1.0 and ledger.answers[0]["round"] == wire["round"]


# ------------------------------------------------------------- rounds, replays
def private_round(ledgers, seed):
    """One round of a FedCP2-QQ plan: a fresh round id, one message per agent."""
    plan = make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20)
    wire = plan_to_dict(plan)
    messages = [
        agent_message(part, wire, j, ledger=ledgers[j], random_state=seed + j)
        for j, part in enumerate(parts_of(seed=seed))
    ]
    return wire, messages


def test_messages_echo_the_round_and_the_plan_digest():
    wire, messages = private_round([AgentLedger(1.0) for _ in SIZES], 0)
    plan_of_wire = make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20)
    assert {m["round"] for m in messages} == {wire["round"]}
    assert {m["plan_digest"] for m in messages} == {plan_digest(plan_of_wire)}
    assert aggregate(json.loads(json.dumps(wire)), messages).feasible


def test_issue_24_a_replayed_message_is_refused():
    """Round 1 and round 2 of the same plan (new data, new ledgers): a message of round 1
    in round 2 is refused, and so are duplicates and messages of another plan."""
    first, old = private_round([AgentLedger(1.0) for _ in SIZES], 0)
    second, new = private_round([AgentLedger(1.0) for _ in SIZES], 10)
    assert first["round"] != second["round"]
    with pytest.raises(ValueError, match=r"another round.*replayed"):
        aggregate(second, [old[0], new[1], new[2]])
    with pytest.raises(ValueError, match="more than one message"):
        aggregate(second, [new[0], new[1], new[1]])
    other = plan_to_dict(make_plan(SIZES, ALPHA, epsilon=2.0, n_bins=20))
    foreign = agent_message(parts_of()[1], other, 1, ledger=AgentLedger(2.0), random_state=1)
    with pytest.raises(ValueError, match="another plan"):
        aggregate(second, [new[0], foreign, new[2]])
    assert aggregate(second, new).threshold == aggregate(second, new[::-1]).threshold


def test_aggregate_needs_the_round_dict():
    _, messages = private_round([AgentLedger(1.0) for _ in SIZES], 0)
    with pytest.raises(TypeError, match="round id"):
        aggregate(make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20), messages)


@pytest.mark.parametrize("round_id", ["", "00" * 15, "0" * 31 + "G", "A" * 32, 7])
def test_round_ids_are_32_lowercase_hexadecimal_digits(round_id):
    plan = make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20)
    error = TypeError if not isinstance(round_id, str) else ValueError
    with pytest.raises(error, match="round"):
        plan_to_dict(plan, round_id=round_id)
    wire = plan_to_dict(plan)
    with pytest.raises(error, match="round"):
        agent_message(parts_of()[0], dict(wire, round=round_id), 0, ledger=AgentLedger(1.0))
    with pytest.raises(ValueError, match="digest does not match"):
        aggregate(dict(wire, round="ab" * 16), [])


def test_each_plan_dict_opens_a_new_round():
    plan = make_plan(SIZES, ALPHA, epsilon=1.0, n_bins=20)
    rounds = {plan_to_dict(plan)["round"] for _ in range(100)}
    assert len(rounds) == 100


# ----------------------------------------------------------- the ledger file
def answer(ledger, alpha=ALPHA, seed=0):
    wire = plan_to_dict(make_plan(SIZES, alpha, epsilon=1.0, n_bins=20))
    return agent_message(parts_of()[0], wire, 0, ledger=ledger, random_state=seed)


def test_a_ledger_file_is_written_at_once_and_reloaded(tmp_path):
    path = tmp_path / "agent-0.json"
    ledger = AgentLedger(2.5, path=path)
    assert json.loads(path.read_text())["answers"] == []
    message = answer(ledger)
    reloaded = AgentLedger(2.5, path=str(path))
    assert reloaded.answers == ledger.answers and reloaded.spent == 1.0
    assert reloaded.answers[0]["round"] == message["round"]
    with pytest.raises(ValueError, match="already answered this plan"):
        answer(reloaded)
    answer(reloaded, alpha=0.12)
    with pytest.raises(ValueError, match=r"spent 2 of its max_epsilon = 2\.5"):
        answer(AgentLedger(2.5, path=path), alpha=0.13)


def test_two_ledger_objects_on_one_file_see_each_others_answers(tmp_path):
    """Each reservation reads the file again: a stale ledger object cannot overspend."""
    path = tmp_path / "agent.json"
    first, second = AgentLedger(1.5, path=path), AgentLedger(1.5, path=path)
    answer(first)
    with pytest.raises(ValueError, match="already answered this plan"):
        answer(second)
    with pytest.raises(ValueError, match=r"spent 1 of its max_epsilon = 1\.5"):
        answer(second, alpha=0.12)
    assert len(AgentLedger(1.5, path=path).answers) == 1


ENTRY = {
    "round": "ab" * 16,
    "plan_digest": "cd" * 32,
    "protocol": "FedCP2-QQ",
    "agent": 0,
    "epsilon": 1.0,
}


def ledger_text(max_epsilon=2.0, answers=(ENTRY,), **changes):
    data = {
        "format": "privconf_sklearn.federated.AgentLedger",
        "version": 1,
        "max_epsilon": max_epsilon,
        "answers": list(answers),
    }
    return json.dumps({**data, **changes})


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "[]",
        '{"answers": []}',
        ledger_text(format="something else"),
        ledger_text(version=2),
        ledger_text(version=1.0),
        ledger_text(max_epsilon=3.0),
        ledger_text(answers=[dict(ENTRY, epsilon=-1.0)]),
        ledger_text(answers=[dict(ENTRY, epsilon=True)]),
        ledger_text(answers=[dict(ENTRY, epsilon=None)]),  # non-private needs FedCP-QQ
        ledger_text(answers=[dict(ENTRY, epsilon="1")]),
        ledger_text(answers=[dict(ENTRY, agent=True)]),
        ledger_text(answers=[dict(ENTRY, round="short")]),
        ledger_text(answers=[dict(ENTRY, protocol="FedCP3")]),
        ledger_text(answers=[{**ENTRY, "extra": 1}]),
        ledger_text(answers=[ENTRY, ENTRY]),
        ledger_text(answers="none"),
        '{"format": ' * 100_000,
    ],
)
def test_a_corrupted_ledger_file_is_a_clear_error_never_a_reset(tmp_path, text):
    path = tmp_path / "agent.json"
    path.write_text(text)
    with pytest.raises(LedgerFileError, match=r"agent\.json cannot be read .* not reset"):
        AgentLedger(2.0, path=path)
    assert path.read_text() == text


def test_a_valid_file_is_read_exactly(tmp_path):
    path = tmp_path / "agent.json"
    second = dict(ENTRY, round="ef" * 16, plan_digest="0" * 64)
    path.write_text(ledger_text(answers=[ENTRY, second]))
    ledger = AgentLedger(2.0, path=path)
    assert ledger.spent == 2.0 and len(ledger.answers) == 2


def test_a_ledger_file_changed_or_deleted_behind_the_ledger_stops_it(tmp_path):
    path = tmp_path / "agent.json"
    ledger = AgentLedger(3.0, path=path)
    answer(ledger)
    path.write_text(ledger_text(max_epsilon=3.0, answers=[]))  # rolled back
    with pytest.raises(LedgerFileError, match="no longer holds the answers"):
        answer(ledger, alpha=0.12)
    path.write_text("garbage")
    with pytest.raises(LedgerFileError, match="cannot be read"):
        answer(ledger, alpha=0.12)
    path.unlink()
    with pytest.raises(LedgerFileError, match="was deleted"):
        answer(ledger, alpha=0.12)
    assert not path.exists() and len(ledger.answers) == 1


def test_a_failed_write_leaves_the_file_and_the_ledger_unchanged(tmp_path):
    """The file is replaced atomically: a write that fails sends no message, keeps the
    old file, records nothing in memory and leaves no temporary file."""
    path = tmp_path / "agent.json"
    ledger = AgentLedger(3.0, path=path)
    answer(ledger)
    before = path.read_text()
    with (
        mock.patch("privconf_sklearn.federated._ledger.os.replace", side_effect=OSError("disk")),
        pytest.raises(OSError, match="disk"),
    ):
        answer(ledger, alpha=0.12)
    assert path.read_text() == before and len(ledger.answers) == 1
    assert sorted(os.listdir(tmp_path)) == [".agent.json.lock", "agent.json"]  # no temporary
    answer(ledger, alpha=0.12)
    assert len(AgentLedger(3.0, path=path).answers) == 2


def test_ledger_arguments_are_checked():
    with pytest.raises(ValueError, match="max_epsilon"):
        AgentLedger(0.0)
    with pytest.raises(ValueError, match="max_epsilon"):
        AgentLedger(float("inf"))
    with pytest.raises(TypeError, match="path"):
        AgentLedger(1.0, path=3)
    assert "in memory" in repr(AgentLedger(1.0))


# ------------------------------------------------------------- concurrency
#: Six distinct plans of epsilon 0.5 each, against budgets of 1: two answers fit.
RACE_SIZES = (400, 400, 400)


def race_plans():
    return [
        plan_to_dict(make_plan(RACE_SIZES, alpha, epsilon=0.5, n_bins=20, gamma=0.5))
        for alpha in (0.1, 0.11, 0.12, 0.13, 0.14, 0.15)
    ]


def slow_budget_check(delay):
    """Widen the race window: every budget check waits ``delay`` seconds first."""
    from privconf_sklearn.federated import _ledger

    check = _ledger._check_budget

    def slow(*args):
        time.sleep(delay)
        return check(*args)

    return mock.patch.object(_ledger, "_check_budget", slow)


def answers_at_once(ledgers, wires):
    """Each thread answers its plan on its ledger, all at once; the number of messages sent."""
    scores = parts_of(RACE_SIZES)[0]
    sent = []

    def run(ledger, wire):
        try:
            agent_message(scores, wire, 0, ledger=ledger, random_state=0)
        except ValueError:
            return
        sent.append(wire["round"])

    threads = [threading.Thread(target=run, args=pair) for pair in zip(ledgers, wires, strict=True)]
    with slow_budget_check(0.05):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return len(sent)


def test_threads_sharing_a_ledger_cannot_overspend_it():
    """Issue 24: without serialisation every thread passed the check on the same record."""
    ledger = AgentLedger(1.0)
    assert answers_at_once([ledger] * 6, race_plans()) == 2
    assert len(ledger.answers) == 2 and ledger.spent == 1.0


def test_ledger_objects_on_one_file_in_threads_cannot_overspend_it(tmp_path):
    path = tmp_path / "agent.json"
    ledgers = [AgentLedger(1.0, path=path) for _ in range(6)]
    assert answers_at_once(ledgers, race_plans()) == 2
    assert AgentLedger(1.0, path=path).spent == 1.0


CHILD = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from unittest import mock
    from privconf_sklearn.federated import AgentLedger, _ledger, agent_message
    import numpy as np
    path, wire, folder = Path(sys.argv[1]), json.loads(sys.argv[2]), Path(sys.argv[3])
    check = _ledger._check_budget
    def slow(*args):
        time.sleep(0.5)
        return check(*args)
    ledger = AgentLedger(1.0, path=path)
    (folder / f"ready-{wire['round']}").touch()
    while not (folder / "go").exists():
        time.sleep(0.01)
    with mock.patch.object(_ledger, "_check_budget", slow):
        try:
            agent_message(np.linspace(0, 1, 400), wire, 0, ledger=ledger, random_state=0)
        except ValueError:
            sys.exit(3)
    """
)


@pytest.mark.slow
@pytest.mark.skipif(os.name != "posix", reason="ledger files are locked across processes on POSIX")
def test_processes_sharing_a_ledger_file_cannot_overspend_it(tmp_path):
    """Four processes answer at once, each with its own ledger object on one file."""
    path = tmp_path / "agent.json"
    AgentLedger(1.0, path=path)
    wires = race_plans()[:4]
    children = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(path), json.dumps(wire), str(tmp_path)])
        for wire in wires
    ]
    deadline = time.monotonic() + 120
    while len(list(tmp_path.glob("ready-*"))) < len(children) and time.monotonic() < deadline:
        time.sleep(0.05)
    (tmp_path / "go").touch()
    codes = [child.wait(timeout=120) for child in children]
    assert sorted(codes) == [0, 0, 3, 3]
    assert AgentLedger(1.0, path=path).spent == 1.0


# ------------------------------------------------- the ledger file's identity
def answers_one(ledger, wire):
    """Whether ``ledger``'s agent sends a message for ``wire`` (False: refused)."""
    try:
        agent_message(parts_of(RACE_SIZES)[0], wire, 0, ledger=ledger, random_state=0)
    except ValueError:
        return False
    return True


@pytest.mark.skipif(os.name != "posix", reason="symbolic links")
def test_a_symlinked_ledger_path_writes_through_to_one_ledger(tmp_path):
    """os.replace on a link would replace the link: the two names would then hold two
    ledgers for the same rows (a reviewer's attack: 1.5 spent of 1.0)."""
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    by_real = AgentLedger(1.0, path=real)
    link.symlink_to(real)
    by_link = AgentLedger(1.0, path=link)
    wires = race_plans()[:4]
    sent = [answers_one(ledger, w) for ledger, w in zip([by_real, by_link] * 2, wires, strict=True)]
    assert sent == [True, True, False, False] and link.is_symlink()
    assert by_link.path == real.resolve()


def test_a_relative_ledger_path_survives_a_change_of_directory(tmp_path, monkeypatch):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    ledger = AgentLedger(1.0, path="agent.json")
    first, second = race_plans()[:2]
    assert answers_one(ledger, first)
    monkeypatch.chdir(tmp_path / "b")
    assert answers_one(ledger, second)
    assert list((tmp_path / "b").iterdir()) == []


def test_a_new_ledger_is_never_written_over_an_existing_one(tmp_path):
    """Two agents start at once on a new path: the one that finds no file creates it
    exclusively, so a file created meanwhile is read, never reset."""
    path = tmp_path / "agent.json"
    first = AgentLedger(1.0, path=path)
    wires = race_plans()[:3]
    assert answers_one(first, wires[0]) and answers_one(first, wires[1])
    read = AgentLedger._read

    def saw_no_file_first(self, *, missing_ok=False):
        if missing_ok:  # the constructor's look, before the other agent's file appeared
            return None
        return read(self)

    with mock.patch.object(AgentLedger, "_read", saw_no_file_first):
        second = AgentLedger(1.0, path=path)
    assert second.spent == 1.0 and not answers_one(second, wires[2])


def test_an_in_memory_ledger_cannot_be_copied_but_a_file_ledger_can(tmp_path):
    """A copy of an in-memory ledger (pickled to a worker, deep-copied) would hold the
    same budget again for the same rows; a file ledger's copies share the file."""
    import copy
    import pickle

    ledger = AgentLedger(1.0)
    for duplicate in (pickle.dumps, copy.deepcopy, copy.copy):
        with pytest.raises(TypeError, match=r"cannot be copied or pickled: .* Give it a path"):
            duplicate(ledger)
    on_file = AgentLedger(1.0, path=tmp_path / "agent.json")
    twin = pickle.loads(pickle.dumps(on_file))
    wires = race_plans()[:3]
    assert answers_one(on_file, wires[0]) and answers_one(twin, wires[1])
    assert not answers_one(on_file, wires[2]) and twin.spent == 1.0


@pytest.mark.skipif(os.name != "posix", reason="ledger files are locked on POSIX")
def test_a_ledger_that_cannot_be_locked_says_which_ledger(tmp_path):
    denied = PermissionError(13, "Permission denied")
    with (
        mock.patch("privconf_sklearn.federated._ledger.os.open", side_effect=denied),
        pytest.raises(PermissionError, match=r"Cannot lock the agent ledger .*agent\.json"),
    ):
        AgentLedger(1.0, path=tmp_path / "agent.json")
    assert list(tmp_path.iterdir()) == []
