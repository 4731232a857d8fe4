"""An agent's own privacy ledger across protocol rounds, in memory or in a JSON file.

Every message an agent sends is recorded before its scores are read: the round it
answered (the server's nonce), the digest of the plan, the agent's index and the
epsilon the message costs (``None`` for an exact, non-private message; ``0`` for the
top of the range sent without reading the data). Messages on the same rows compose
sequentially, so the ledger's spend is the exact (rational) sum of the recorded
epsilons, and a message that would take it above ``max_epsilon`` is refused. A round
or a plan already answered is refused too: the same plan asked twice, or a replayed
round, gets no second answer.

With ``path``, the ledger lives in a JSON file the owner names: read when the ledger
is made (a new file is written at once, so that a path that cannot be written fails
before any round), read again before every reservation (another ledger object on the
same file, or an earlier run, may have spent), and replaced atomically (a temporary
file in the same directory, flushed and synced, then :func:`os.replace`). A file that
cannot be read back exactly (not JSON, unknown format, wrong types, a budget other than
the one given) is a clear error, never a silent reset.

Reservations are serialised: one lock per ledger object for its threads, and for a file,
one lock per file shared by every ledger object of the process and, on POSIX systems,
an exclusive ``flock`` on a companion file (``.<name>.lock`` beside the ledger) held
from the read to the write, so that threads and processes answering at once cannot both
pass the budget check on the same record. Where ``fcntl`` is missing (Windows), only
the threads of one process are serialised: give each agent process its own file there.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from fractions import Fraction
from numbers import Real
from pathlib import Path
from typing import Any

from .._param_validation import Interval, validate_params
from ..mechanisms.fedcp import FEDCP2_QQ, FEDCP_QQ

try:  # POSIX: serialise the processes appending to one ledger file
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["ROUND_ID", "AgentLedger", "LedgerFileError"]

#: The form of a round id: 32 lowercase hexadecimal digits (``secrets.token_hex(16)``).
ROUND_ID = re.compile(r"[0-9a-f]{32}")
_DIGEST = re.compile(r"[0-9a-f]{64}")
_FORMAT = "privconf_sklearn.federated.AgentLedger"
_VERSION = 1
_ENTRY_KEYS = {"round", "plan_digest", "protocol", "agent", "epsilon"}


class LedgerFileError(ValueError):
    """The agent's ledger file cannot be read back exactly; it is never reset silently."""


def _is_hex(pattern: re.Pattern, value) -> bool:
    return isinstance(value, str) and pattern.fullmatch(value) is not None


def _entry_epsilon(value) -> float | None:
    """``None`` (non-private) or a finite number >= 0; anything else is not an epsilon."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("epsilon must be null or a number")
    if not 0 <= value <= 1.7976931348623157e308:  # NaN, infinities and huge integers fail
        raise ValueError("epsilon must be a finite number >= 0")
    return float(value)


def _checked_entry(entry) -> dict[str, Any]:
    """One recorded answer, read strictly (raises TypeError or ValueError)."""
    if not isinstance(entry, dict) or set(entry) != _ENTRY_KEYS:
        raise ValueError(f"an entry must have exactly the keys {sorted(_ENTRY_KEYS)}")
    if not _is_hex(ROUND_ID, entry["round"]) or not _is_hex(_DIGEST, entry["plan_digest"]):
        raise ValueError("an entry's round or plan_digest is not a hexadecimal id")
    if entry["protocol"] not in (FEDCP_QQ, FEDCP2_QQ):
        raise ValueError(f"unknown protocol {entry['protocol']!r}")
    agent = entry["agent"]
    if type(agent) is not int or not 0 <= agent < 10**9:
        raise ValueError("an entry's agent is not an index")
    epsilon = _entry_epsilon(entry["epsilon"])
    if (epsilon is None) != (entry["protocol"] == FEDCP_QQ) and epsilon != 0.0:
        raise ValueError("an entry's epsilon does not match its protocol")
    return {**entry, "epsilon": epsilon}


class AgentLedger:
    """One agent's privacy budget across federated rounds (its own, not the server's).

    Pass it to :func:`~privconf_sklearn.federated.agent_message`, which reserves each
    message's epsilon here before it reads a score, and refuses a message beyond the
    budget, a round already answered, or a plan already answered (under a new round id).
    Messages on the same rows compose sequentially (Dwork and Roth 2014, Theorem 3.16):
    after answering messages of ``epsilon_1, ..., epsilon_r``, everything this agent
    sent is ``(epsilon_1 + ... + epsilon_r)``-DP in its rows, at most ``max_epsilon``.
    Use one ledger per data set: new rows start a new ledger. An in-memory ledger cannot
    be copied or pickled (the copy would hold the same budget again); a ledger with a
    file can, its copies sharing the file.

    Parameters
    ----------
    max_epsilon : float
        The agent's total budget over every round, finite and > 0.
    path : str, os.PathLike or None, default=None
        A JSON file that keeps the ledger across processes and restarts. An existing
        file is read (it must record the same ``max_epsilon``); a missing one is written
        at once. Each reservation reads the file again and replaces it atomically,
        holding a lock (on POSIX, an ``flock`` on the companion ``.<name>.lock``) so that
        threads and processes sharing the file answer one at a time. The path is resolved
        once (symbolic links followed, relative to the current directory); a new file is
        created exclusively, never over a ledger another agent has just created.
        None keeps the ledger in memory only.

    Raises
    ------
    InvalidParameterError
        If ``max_epsilon`` is not a finite number > 0, or ``path`` not a path.
    LedgerFileError
        If the file exists but cannot be read back exactly (a ``ValueError``).
    OSError
        If the file cannot be read or written.

    Examples
    --------
    >>> ledger = AgentLedger(2.0)
    >>> ledger.spent, ledger.remaining, ledger.answers
    (0.0, 2.0, ())
    """

    def __init__(self, max_epsilon, *, path=None):
        checked = validate_params(
            {
                "max_epsilon": [Interval(Real, 0.0, None, closed="neither")],
                "path": [None, str, os.PathLike],
            },
            {"max_epsilon": max_epsilon, "path": path},
            "AgentLedger",
        )
        self._max_epsilon: float = checked["max_epsilon"]
        # Resolved once: a symlink is followed (the file it names is replaced, never the
        # link) and a relative path survives a change of directory.
        self._path = None if path is None else Path(os.path.realpath(path))
        self._lock = threading.Lock()
        self._answers: tuple[dict[str, Any], ...] = ()
        if self._path is not None:
            with _file_lock(self._path):  # not between another agent's read and write
                found = self._read(missing_ok=True)
                self._answers = self._create() if found is None else found

    def __getstate__(self) -> dict[str, Any]:
        if self._path is None:
            raise TypeError(
                "An in-memory AgentLedger cannot be copied or pickled: the copy would hold "
                "the same budget again for the same rows. Give it a path (a ledger file) to "
                "share it between processes."
            )
        state = self.__dict__.copy()
        del state["_lock"]  # a lock belongs to its process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = "in memory" if self._path is None else f"path={str(self._path)!r}"
        return (
            f"AgentLedger(max_epsilon={self._max_epsilon!r}, {where}, "
            f"{len(self._answers)} answers, spent={self.spent!r})"
        )

    @property
    def max_epsilon(self) -> float:
        """The total budget."""
        return self._max_epsilon

    @property
    def path(self) -> Path | None:
        """The ledger file, or None in memory."""
        return self._path

    @property
    def answers(self) -> tuple[dict[str, Any], ...]:
        """Every recorded answer, oldest first.

        Each is a dict of ``round``, ``plan_digest``, ``protocol``, ``agent`` and
        ``epsilon`` (None: an exact, non-private message).
        """
        return tuple(dict(entry) for entry in self._answers)

    @property
    def spent(self) -> float:
        """The sum of the recorded epsilons (``inf`` once a non-private message was sent)."""
        return float(_total(self._answers))

    @property
    def remaining(self) -> float:
        """``max_epsilon - spent``, at least 0."""
        return max(0.0, float(Fraction(self._max_epsilon) - _total(self._answers)))

    # ------------------------------------------------------------ reservation
    def _reserve(
        self, *, round_id: str, plan_digest: str, protocol: str, agent: int, epsilon
    ) -> None:
        """Check and record one answer before any score is read (persisted first).

        Serialised (see the module docstring): the check and the record are one step.
        """
        held = nullcontext() if self._path is None else _file_lock(self._path)
        with self._lock, held:
            answers = self._answers if self._path is None else self._existing()
            if answers[: len(self._answers)] != self._answers:
                raise LedgerFileError(
                    f"The ledger file {self._path} no longer holds the answers this ledger "
                    "recorded (it was replaced or edited): refusing to answer."
                )
            _check_new(answers, round_id, plan_digest)
            if epsilon is not None:
                _check_budget(answers, epsilon, self._max_epsilon)
            entry = {
                "round": round_id,
                "plan_digest": plan_digest,
                "protocol": protocol,
                "agent": agent,
                "epsilon": epsilon,
            }
            updated = (*answers, entry)
            if self._path is not None:
                self._write(updated)
            self._answers = updated

    # --------------------------------------------------------------- the file
    def _read(self, *, missing_ok: bool = False) -> tuple[dict[str, Any], ...] | None:
        """The file's answers (None for a missing file when ``missing_ok``)."""
        assert self._path is not None
        try:
            answers = _parse(json.loads(self._path.read_text(encoding="utf-8")), self._max_epsilon)
        except FileNotFoundError:
            if missing_ok:
                return None
            raise LedgerFileError(
                f"The agent ledger file {self._path} was deleted: refusing to start from an "
                "empty ledger."
            ) from None
        except (TypeError, ValueError, RecursionError) as error:
            raise LedgerFileError(
                f"The agent ledger file {self._path} cannot be read ({error}); it is not "
                "reset silently: restore it from a backup, or, if these rows were never "
                "used, delete the file deliberately."
            ) from None
        return answers

    def _existing(self) -> tuple[dict[str, Any], ...]:
        """The file's answers (:class:`LedgerFileError` if it is missing)."""
        found = self._read()
        assert found is not None  # a missing file raised
        return found

    def _create(self) -> tuple[dict[str, Any], ...]:
        """Write an empty ledger where there is none; never over one (a hard link is exclusive)."""
        assert self._path is not None
        temporary = self._written((), "create")
        try:
            os.link(temporary, self._path)
        except FileExistsError:  # created meanwhile (only possible without flock): read it
            return self._existing()
        except OSError as error:
            raise type(error)(f"Cannot create the agent ledger {self._path}: {error}") from error
        finally:
            Path(temporary).unlink(missing_ok=True)
        return ()

    def _write(self, answers: tuple[dict[str, Any], ...]) -> None:
        assert self._path is not None
        temporary = self._written(answers, "write")
        try:
            os.replace(temporary, self._path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def _written(self, answers: tuple[dict[str, Any], ...], action: str) -> str:
        """A temporary file beside the ledger holding ``answers``, flushed and synced."""
        assert self._path is not None
        payload = {
            "format": _FORMAT,
            "version": _VERSION,
            "max_epsilon": self._max_epsilon,
            "answers": list(answers),
        }
        text = json.dumps(payload, indent=1, allow_nan=False) + "\n"
        try:
            handle, temporary = tempfile.mkstemp(
                prefix=f".{self._path.name}.", dir=self._path.parent
            )
        except OSError as error:
            raise type(error)(f"Cannot {action} the agent ledger {self._path}: {error}") from error
        try:
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
                stream.flush()
                os.fsync(stream.fileno())
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        return temporary


#: One lock per ledger file (resolved path) for the threads of this process.
_FILE_LOCKS: dict[str, threading.Lock] = {}
_FILE_LOCKS_GUARD = threading.Lock()


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock: this process's threads, then other processes (POSIX ``flock``)."""
    with _FILE_LOCKS_GUARD:
        lock = _FILE_LOCKS.setdefault(str(path), threading.Lock())  # path is resolved
    with lock:
        if fcntl is None:  # pragma: no cover - Windows
            yield
            return
        try:
            handle = os.open(path.with_name(f".{path.name}.lock"), os.O_RDONLY | os.O_CREAT, 0o644)
        except OSError as error:
            raise type(error)(f"Cannot lock the agent ledger {path}: {error}") from error
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
            yield
        finally:
            os.close(handle)  # releases the flock


def _total(answers) -> Fraction | float:
    """The exact sum of the recorded epsilons; ``inf`` if one is None (non-private)."""
    if any(entry["epsilon"] is None for entry in answers):
        return math.inf
    return sum((Fraction(entry["epsilon"]) for entry in answers), Fraction(0))


def _check_new(answers, round_id: str, plan_digest: str) -> None:
    for entry in answers:
        if entry["round"] == round_id:
            raise ValueError(
                f"This agent already answered round {round_id}: a round gets one message."
            )
        if entry["plan_digest"] == plan_digest:
            raise ValueError(
                f"This agent already answered this plan (digest {plan_digest[:16]}..., round "
                f"{entry['round']}): the same plan gets one message, whatever its round id."
            )


def _check_budget(answers, epsilon: float, max_epsilon: float) -> None:
    spent = _total(answers)
    if spent == math.inf:
        raise ValueError(
            "This agent's ledger records a non-private message (an exact score): its rows "
            "have no privacy budget left."
        )
    if spent + Fraction(epsilon) > Fraction(max_epsilon):
        raise ValueError(
            f"The message costs epsilon = {epsilon:g}; this agent has spent {float(spent):g} "
            f"of its max_epsilon = {max_epsilon:g} ({float(max_epsilon - spent):g} left): "
            "refusing it."
        )


def _parse(data, max_epsilon: float) -> tuple[dict[str, Any], ...]:
    """The answers of a ledger file's JSON, read strictly (raises TypeError or ValueError)."""
    if not isinstance(data, dict) or set(data) != {"format", "version", "max_epsilon", "answers"}:
        raise ValueError("not an agent ledger (wrong keys)")
    if data["format"] != _FORMAT or type(data["version"]) is not int:
        raise ValueError(f"not an agent ledger (format {str(data['format'])[:60]!r})")
    if data["version"] != _VERSION:
        raise ValueError(f"ledger version {data['version']!r}, this library reads {_VERSION}")
    if data["max_epsilon"] != max_epsilon or isinstance(data["max_epsilon"], bool):
        raise ValueError(
            f"it records max_epsilon = {str(data['max_epsilon'])[:30]}, not the {max_epsilon!r} "
            "given"
        )
    if not isinstance(data["answers"], list):
        raise ValueError("its answers are not a list")
    answers = tuple(_checked_entry(entry) for entry in data["answers"])
    rounds = [entry["round"] for entry in answers]
    digests = [entry["plan_digest"] for entry in answers]
    if len(set(rounds)) != len(rounds) or len(set(digests)) != len(digests):
        raise ValueError("it records a round or a plan twice")
    return answers
