"""The command line: card show/verify, exit codes, closed pipes and bad arguments (issue 13)."""

import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from privconf_sklearn.__main__ import main
from privconf_sklearn.cards import Contract, ContractCard
from privconf_sklearn.mechanisms import Calibration, ExponQ

CONTRACT = Contract(0.9, max_epsilon_train=2.0, max_epsilon_cal=1.0, beta=1e-3)


@lru_cache(maxsize=1)
def _cards():
    met = ContractCard.for_configuration(
        ExponQ(epsilon=1.0), 3000, 0.1, contract=CONTRACT, epsilon_train=2.0
    )
    not_met = ContractCard.for_configuration(
        ExponQ(epsilon=1.0), 10, 0.1, contract=CONTRACT, epsilon_train=2.0
    )
    return met, not_met


def _run(*args, close_stdout=False):
    process = subprocess.Popen(
        [sys.executable, "-m", "privconf_sklearn", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if close_stdout:  # the reader went away, as `| head` does
        process.stdout.close()
        stderr = process.stderr.read()
        process.wait()
        return process.returncode, "", stderr
    stdout, stderr = process.communicate()
    return process.returncode, stdout, stderr


def test_show_and_verify(tmp_path, capsys):
    met, not_met = _cards()
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    met.save(good)
    not_met.save(bad)
    assert main(["card", "show", str(good)]) == 0
    assert capsys.readouterr().out.startswith("# Contract card — FEASIBLE")
    assert main(["card", "show", str(good), "--format", "json"]) == 0
    assert ContractCard.from_json(capsys.readouterr().out) == met
    assert main(["card", "verify", str(good)]) == 0
    assert "ACCEPTED" in capsys.readouterr().out
    assert main(["card", "verify", str(bad)]) == 1
    assert "FAIL] level_reachable" in capsys.readouterr().out
    edited = tmp_path / "edited.json"
    edited.write_text(good.read_text().replace('"target_coverage": 0.9', '"target_coverage": 0.8'))
    assert main(["card", "verify", str(edited)]) == 2
    assert "edited" in capsys.readouterr().out
    assert main(["card", "show", str(edited)]) == 0
    assert "does not match" in capsys.readouterr().err


@pytest.mark.slow
def test_module_entry_point_exit_code(tmp_path):
    _cards()[1].save(tmp_path / "bad.json")
    code, stdout, stderr = _run("card", "verify", str(tmp_path / "bad.json"))
    assert code == 1, stderr
    assert "REJECTED" in stdout


@pytest.mark.slow
@pytest.mark.parametrize(("action", "card", "expected"), [("show", 0, 0), ("verify", 1, 1)])
def test_a_closed_pipe_ends_quietly(tmp_path, action, card, expected):
    """``card show card.json | head`` must not end in a BrokenPipeError traceback."""
    _cards()[card].save(tmp_path / "card.json")
    code, _, stderr = _run("card", action, str(tmp_path / "card.json"), close_stdout=True)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr
    assert code == expected  # the command's own exit code


@pytest.mark.parametrize(
    "content",
    ["", "garbage", "[1, 2]", "{}", "\x00\x01", "[" * 100_000],
    ids=["empty", "garbage", "array", "empty object", "binary", "deep"],
)
@pytest.mark.parametrize("action", ["show", "verify"])
def test_unreadable_cards_exit_2_with_one_line(tmp_path, capsys, action, content):
    path = tmp_path / "card.json"
    path.write_text(content)
    assert main(["card", action, str(path)]) == 2
    captured = capsys.readouterr()
    message = captured.err if action == "show" else captured.out
    assert "Traceback" not in message and message.strip()
    if action == "show":
        assert len(message.strip().splitlines()) == 1


@pytest.mark.parametrize("action", ["show", "verify"])
def test_missing_files_and_directories_exit_2(tmp_path, capsys, action):
    for target in (tmp_path / "missing.json", tmp_path):
        assert main(["card", action, str(target)]) == 2
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--alpha", "2"],
        ["demo", "--alpha", "nan"],
        ["demo", "--alpha", "0"],
        ["demo", "--epsilon-cal", "-1"],
        ["demo", "--epsilon-cal", "inf"],
        ["demo", "--epsilon-model", "abc"],
        ["demo", "--n-samples", "0"],
        ["demo", "--n-samples", "2.5"],
        ["demo", "--n-samples", "10" + "0" * 400],
        ["demo", "--seed", "-1"],
        ["demo", "--score", "raps?"],
        ["card", "inspect", "card.json"],
        ["card", "show"],
        [],
    ],
)
def test_bad_arguments_are_usage_errors(capsys, argv):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert error.strip().splitlines()[-1].startswith("usage:") or "error:" in error


def test_help_documents_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["card", "--help"])
    assert "exit codes: 0" in capsys.readouterr().out.replace("\n", " ")


def test_verify_with_a_public_key(tmp_path, capsys):
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    serialization = pytest.importorskip("cryptography.hazmat.primitives.serialization")
    key = ed25519.Ed25519PrivateKey.generate()
    pem = tmp_path / "issuer.pem"
    pem.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _cards()[0].sign(key).save(tmp_path / "signed.json")
    _cards()[0].save(tmp_path / "unsigned.json")
    assert main(["card", "verify", str(tmp_path / "signed.json"), "--public-key", str(pem)]) == 0
    assert "signature: valid" in capsys.readouterr().out
    assert main(["card", "verify", str(tmp_path / "unsigned.json"), "--public-key", str(pem)]) == 2
    assert "not signed" in capsys.readouterr().out
    assert main(["card", "verify", str(tmp_path / "signed.json"), "--public-key", "nope"]) == 2
    assert "cannot read the public key" in capsys.readouterr().err
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    assert (
        main(["card", "verify", str(tmp_path / "signed.json"), "--public-key", str(garbage)]) == 2
    )
    assert "error:" in capsys.readouterr().err


def _trivial_card():
    """A release at the top of the range (all labels) although the level is reachable."""
    mechanism = ExponQ(epsilon=1.0)
    calibration = Calibration(
        mechanism="ExponQ",
        threshold=1.0,
        n_samples=3000,
        alpha=0.1,
        privacy=mechanism.privacy_guarantee(),
        coverage_lower_bound=mechanism.coverage_certificate(3000, 0.1).lower_bound,
        reason="the sampled bin was the top one",
    )
    return ContractCard.from_calibration(
        calibration, mechanism, contract=CONTRACT, epsilon_train=2.0
    )


def test_verify_an_all_label_release_is_not_met(tmp_path, capsys):
    """Issue 23 item 5: exit 1, "not met", with the reason."""
    _trivial_card().save(tmp_path / "trivial.json")
    assert main(["card", "verify", str(tmp_path / "trivial.json")]) == 1
    out = capsys.readouterr().out
    assert "REJECTED: contract not met (informative)" in out
    assert "[FAIL] informative: the release is informative" in out
    assert "every set holds every label" in out


def test_show_marks_what_the_signature_does_not_cover(tmp_path, capsys):
    met = _cards()[0]
    met.save(tmp_path / "unsigned.json")
    assert main(["card", "show", str(tmp_path / "unsigned.json")]) == 0
    out = capsys.readouterr().out
    assert "**Unsigned.** Nothing on this card is signed" in out
    assert "## Diagnostic layer (not formal evidence; UNSIGNED, outside the digest)" in out
    ed25519 = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ed25519")
    met.sign(ed25519.Ed25519PrivateKey.generate()).save(tmp_path / "signed.json")
    assert main(["card", "show", str(tmp_path / "signed.json")]) == 0
    out = capsys.readouterr().out
    assert "the signature covers the schema header, the formal layer and the diagnostic" in out
    assert "## Diagnostic layer (not formal evidence; signed)" in out


def test_cards_of_the_previous_format_exit_2_with_the_reason(capsys):
    old = Path(__file__).parent / "data" / "contract_card_v3.json"
    assert main(["card", "verify", str(old)]) == 2
    assert "written by an earlier privconf_sklearn" in capsys.readouterr().out
    assert main(["card", "show", str(old)]) == 2
    error = capsys.readouterr().err
    assert "written by an earlier privconf_sklearn" in error and "Re-issue" in error
    assert len(error.strip().splitlines()) == 1
